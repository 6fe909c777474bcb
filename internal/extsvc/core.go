// Package extsvc is the controller that reports MeshExternalServices whose
// IP and CIDR matches overlap on a port (seed 003, "IP intersections";
// ARCHITECTURE.md section 8), or whose Domain matches name the same domain
// on a port. Such services cannot both get that traffic (a proxy gives it
// to one: internal/xds), and validation cannot see it, since it looks at
// one document. For every overlapping pair the controller logs seed 003's
// sentence, with the real names and the shared range:
//
//	external-service1 and external-service2 have overlapping IPs 10.1.1.7, which can disrupt your traffic.
//
// (for domains: "... both match the domain httpbin.org, which can disrupt
// your traffic.") and both services carry the condition Overlapping
// (status True, reason OverlappingIPs, or OverlappingDomains when no IPs
// overlap) naming the other, until the overlap ends.
//
// The work is incremental: the pure engine (overlaps.go) keeps an index per
// mesh and port and re-checks only the services a change meets. Core hosts
// it in the shared runner of internal/reconcile, which writes the condition,
// the only part of the status the core owns, with the other cores' parts.
//
// It runs only on the leader and rebuilds its state when a term starts. It
// imports resource, store and reconcile.
package extsvc

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// maxListed bounds the overlaps a condition message spells out; a CIDR such
// as 0.0.0.0/0 may overlap every other external service of the mesh.
const maxListed = 5

// Options configures a Core.
type Options struct {
	Log *slog.Logger
	// Registerer receives the core's metrics; nil for none.
	Registerer prometheus.Registerer
}

// Core decides the Overlapping condition of MeshExternalServices.
type Core struct {
	reconcile.Base
	o       Options
	engine  *Engine
	loading []Service // the first view of a term, loaded at once
	changed []resource.Key
	pairs   prometheus.Gauge
}

// New returns a core; it does no I/O.
func New(o Options) *Core {
	c := &Core{
		o: o,
		pairs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_extsvc_overlapping_pairs", Help: "Pairs of external services whose IPs overlap on a port.",
		}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.pairs)
	}
	return c
}

// Name implements reconcile.Core.
func (c *Core) Name() string { return "extsvc" }

// Watches implements reconcile.Core.
func (c *Core) Watches(k resource.Kind) bool { return k == resource.MeshExternalService }

// Start implements reconcile.Core.
func (c *Core) Start(context.Context, reconcile.Env) error {
	c.engine, c.loading, c.changed = nil, []Service{}, nil
	return nil
}

// Observe implements reconcile.Core.
func (c *Core) Observe(k resource.Key, obj *resource.Object) {
	switch {
	case c.engine == nil:
		c.loading = append(c.loading, ServiceOf(obj))
	case obj == nil:
		c.engine.Delete(Key{k.Mesh, k.Name})
		return
	default:
		c.engine.Set(ServiceOf(obj))
	}
	// The event may be a status write by another core: compare again.
	c.changed = append(c.changed, k)
}

// Dirty implements reconcile.Core; it also logs the pairs that began or
// ended to overlap.
func (c *Core) Dirty() []resource.Key {
	if c.engine == nil {
		c.engine = NewEngine()
		c.engine.Load(c.loading)
		c.loading = nil
		c.o.Log.Info("external services loaded", "overlapping_pairs", c.engine.Pairs())
	}
	for _, ev := range c.engine.TakeEvents() {
		if ev.Gone {
			c.o.Log.Info("external services no longer overlap", "mesh", ev.Mesh, "name", ev.A, "other", ev.B)
			continue
		}
		// seed 003's words, exactly.
		for _, msg := range (Overlap{Other: ev.B, IPs: ev.IPs, Domains: ev.Domains}).Messages(ev.A) {
			c.o.Log.Warn(msg, "mesh", ev.Mesh, "ports", ev.Ports)
		}
	}
	c.pairs.Set(float64(c.engine.Pairs()))
	keys := c.changed
	c.changed = nil
	for _, k := range c.engine.TakeDirty() {
		keys = append(keys, resource.Key{Kind: resource.MeshExternalService, Mesh: k.Mesh, Name: k.Name})
	}
	return keys
}

// patch is what the core owns of a status: its condition.
var patch = store.StatusPatch{Conditions: []string{resource.ConditionOverlapping}}

// Owns implements reconcile.Core.
func (c *Core) Owns(k resource.Kind) store.StatusPatch {
	if k == resource.MeshExternalService {
		return patch
	}
	return store.StatusPatch{}
}

// Decide implements reconcile.Core.
func (c *Core) Decide(obj *resource.Object, st resource.Status) []store.Op {
	if cond := condition(obj.Name, c.engine.Overlaps(Key{obj.Mesh, obj.Name})); cond != nil {
		svc := st.(resource.ServiceStatusOf).Service()
		svc.Conditions = append(svc.Conditions, *cond)
	}
	return nil
}

// Sum implements reconcile.Core.
func (c *Core) Sum(d *reconcile.Digest, st resource.Status) {
	s, ok := st.(resource.ServiceStatusOf)
	if !ok || s == nil {
		return
	}
	for _, cond := range s.Service().Conditions {
		if cond.Type == resource.ConditionOverlapping {
			d.String(cond.Status)
			d.String(cond.Reason)
			d.String(cond.Message)
		}
	}
}

// ServiceOf converts a MeshExternalService for the engine: the prefixes of
// its IP and CIDR matches and the domains of its Domain matches, by port.
// Values that do not parse (stored under older rules) capture nothing.
func ServiceOf(obj *resource.Object) Service {
	s := Service{Key: Key{obj.Mesh, obj.Name}, Ranges: map[int][]netip.Prefix{}, Domains: map[int][]string{}}
	spec, ok := obj.Spec.(*resource.MeshExternalServiceSpec)
	if !ok {
		return s
	}
	for _, m := range spec.Match {
		var p netip.Prefix
		switch m.Type {
		case resource.MatchIP:
			a, err := netip.ParseAddr(m.Value)
			if err != nil {
				continue
			}
			p = netip.PrefixFrom(a.WithZone(""), a.BitLen())
		case resource.MatchCIDR:
			var err error
			if p, err = netip.ParsePrefix(m.Value); err != nil {
				continue
			}
		case resource.MatchDomain:
			s.Domains[m.Port] = append(s.Domains[m.Port], m.Value)
			continue
		default:
			continue
		}
		s.Ranges[m.Port] = append(s.Ranges[m.Port], p)
	}
	return s
}

// condition returns the Overlapping condition of a service with these
// overlaps, or nil when there are none.
func condition(name string, overlaps []Overlap) *resource.Condition {
	if len(overlaps) == 0 {
		return nil
	}
	var msg []string
	for _, o := range overlaps[:min(len(overlaps), maxListed)] {
		msg = append(msg, o.Messages(name)...)
	}
	if n := len(overlaps) - maxListed; n > 0 {
		msg = append(msg, fmt.Sprintf("And %d more external services.", n))
	}
	reason := resource.ReasonOverlappingDomains
	for _, o := range overlaps {
		if len(o.IPs) > 0 {
			reason = resource.ReasonOverlappingIPs
		}
	}
	return &resource.Condition{Type: resource.ConditionOverlapping, Status: resource.ConditionTrue, Reason: reason, Message: strings.Join(msg, " ")}
}
