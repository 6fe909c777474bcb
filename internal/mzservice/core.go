// Package mzservice is the controller that writes what a zone computes for
// each MeshMultiZoneService (seed 002, ARCHITECTURE.md section 7): the
// MeshServices of its mesh that its selector matches (status.meshServices),
// the zones they come from (status.zones), the ports it offers
// (status.ports: declared, or common to every matched service) and the
// conditions MeshServicesMatched and PortsConsistent.
//
// The pure, incremental engine (engine.go, labels.go, result.go) imports
// only resource. Core hosts it in the shared runner of internal/reconcile,
// which writes the parts of the status the core owns together with what
// the hostnames and VIP cores decide of the same status, one write per
// MeshMultiZoneService.
//
// It runs only on the leader of a zone or standalone control plane, and
// rebuilds its state when a term starts. It imports resource, store and
// reconcile. A Core, like its Engine, is used from the runner's goroutine
// only.
package mzservice

import (
	"context"
	"log/slog"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Options configures a Core.
type Options struct {
	// Zone is the local zone: the zone of MeshServices without a
	// kuma.io/zone label.
	Zone string
	Log  *slog.Logger
	// Registerer receives the core's metrics; nil for none.
	Registerer prometheus.Registerer
}

// Core decides status.meshServices, status.zones, status.ports and the
// conditions of ConditionTypes of MeshMultiZoneServices.
type Core struct {
	reconcile.Base
	o      Options
	engine *Engine
	// changed are the MeshMultiZoneServices observed since the last Dirty:
	// an event may be a status write by someone else, to compare again
	// even if the engine saw no change.
	changed []resource.Key
	sizes   *prometheus.GaugeVec
}

// New returns a core; it does no I/O.
func New(o Options) *Core {
	c := &Core{
		o: o,
		sizes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_mzservice_objects", Help: "MeshServices and MeshMultiZoneServices the multi-zone service controller holds.",
		}, []string{"what"}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.sizes)
	}
	return c
}

// Name implements reconcile.Core.
func (c *Core) Name() string { return "mzservice" }

// Watches implements reconcile.Core.
func (c *Core) Watches(k resource.Kind) bool {
	return k == resource.MeshService || k == resource.MeshMultiZoneService
}

// Start implements reconcile.Core: a new term starts from nothing.
func (c *Core) Start(context.Context, reconcile.Env) error {
	c.engine = NewEngine(c.o.Zone)
	c.changed = nil
	return nil
}

// Observe implements reconcile.Core.
func (c *Core) Observe(k resource.Key, obj *resource.Object) {
	switch {
	case k.Kind == resource.MeshService && obj == nil:
		c.engine.DeleteService(k)
	case k.Kind == resource.MeshService:
		c.engine.SetService(obj)
	case obj == nil:
		c.engine.DeleteMultiZoneService(k)
	default:
		c.engine.SetMultiZoneService(obj)
		c.changed = append(c.changed, k)
	}
}

// Dirty implements reconcile.Core.
func (c *Core) Dirty() []resource.Key {
	keys := append(c.changed, c.engine.TakeDirty()...)
	c.changed = nil
	svcs, mzs := c.engine.Sizes()
	c.sizes.WithLabelValues("meshservices").Set(float64(svcs))
	c.sizes.WithLabelValues("meshmultizoneservices").Set(float64(mzs))
	return keys
}

// patch is what the core owns of a MeshMultiZoneService's status.
var patch = store.StatusPatch{Fields: []string{"meshServices", "zones", "ports"}, Conditions: ConditionTypes}

// Owns implements reconcile.Core.
func (c *Core) Owns(k resource.Kind) store.StatusPatch {
	if k == resource.MeshMultiZoneService {
		return store.StatusPatch{Fields: slices.Clone(patch.Fields), Conditions: slices.Clone(patch.Conditions)}
	}
	return store.StatusPatch{}
}

// Decide implements reconcile.Core.
func (c *Core) Decide(obj *resource.Object, st resource.Status) []store.Op {
	mst, ok := st.(*resource.MultiZoneServiceStatus)
	if !ok {
		return nil
	}
	if r, ok := c.engine.Status(obj.Key()); ok {
		r.Apply(mst)
	}
	return nil
}

// Sum implements reconcile.Core.
func (c *Core) Sum(d *reconcile.Digest, st resource.Status) {
	s, ok := st.(*resource.MultiZoneServiceStatus)
	if !ok || s == nil {
		return
	}
	// Each list is preceded by its length, so that entries cannot move
	// from one list to the next unnoticed.
	d.String(strconv.Itoa(len(s.MeshServices)))
	for _, m := range s.MeshServices {
		d.String(m.Name)
		d.String(m.Namespace)
		d.String(m.Zone)
		d.String(m.Mesh)
	}
	d.String(strconv.Itoa(len(s.Zones)))
	for _, z := range s.Zones {
		d.String(z.Name)
	}
	d.String(strconv.Itoa(len(s.Ports)))
	for _, p := range s.Ports {
		d.String(p.Name)
		d.String(strconv.Itoa(p.Port))
		d.String(p.AppProtocol)
	}
	for _, cond := range s.Conditions {
		if slices.Contains(ConditionTypes, cond.Type) {
			d.String(cond.Type)
			d.String(cond.Status)
			d.String(cond.Reason)
			d.String(cond.Message)
		}
	}
}
