// Package hostnames is the controller that gives services their hostnames:
// it feeds HostnameGenerators and services from the cache into the pure
// engine of internal/hostname and writes each service's status.addresses
// (seeds 000 and 001). The InternalVIP values of MeshExternalServices (seed
// 003) and the service-tag names of MeshServices with their aliases (seed
// 004) are claimed in the same per-mesh table of names, and listed in
// status.addresses with origin MeshExternalService, ServiceTag or
// ServiceTagAlias, so that a clash shows on both sides. That table is the
// one decision of who holds a name: DNS, on every instance, answers the
// Available entries of status.addresses and decides nothing itself. It
// also creates the default generators of seed 001.
//
// Core is the controller's core for the shared runner of internal/reconcile:
// the runner tells it which resources changed, the engine re-renders only
// what a change can affect, and the runner writes status.addresses, which
// the core owns and nothing else, together with what the other cores
// decide of the same status. It keeps no copies of resources.
//
// It imports admission, api, history, resource, store, hostname and
// reconcile.
package hostnames

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/hostname"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// OriginKind is the origin kind of generated addresses.
const OriginKind = resource.OriginHostnameGenerator

// serviceKinds are the kinds that get hostnames.
var serviceKinds = []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService}

// Options configures a Core.
type Options struct {
	// Zone is the local zone: the .Zone of services without kuma.io/zone.
	Zone string
	// ServiceTagDomain is the domain of service-tag names (seed 004:
	// frontend_default_svc_80.mesh); empty for none.
	ServiceTagDomain string
	Log              *slog.Logger
	// Registerer receives the core's metrics; nil for none.
	Registerer prometheus.Registerer
}

// Core decides status.addresses.
type Core struct {
	reconcile.Base
	o      Options
	engine *hostname.Engine
	// changed are services observed since the last Dirty: an event may be
	// a status write by someone else, which must be compared again even if
	// the engine saw no change.
	changed []resource.Key
	// ops are the history events of deleted services (Ops).
	ops []reconcile.Write

	sizes        *prometheus.GaugeVec
	unavailable  prometheus.Gauge
	unavailCount map[resource.Key]int
}

// New returns a core; it does no I/O.
func New(o Options) *Core {
	c := &Core{
		o: o,
		sizes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_hostnames_objects", Help: "Generators, services and claimed hostnames the controller holds.",
		}, []string{"what"}),
		unavailable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_hostnames_unavailable_addresses", Help: "Addresses that are NotAvailable (collisions and template errors).",
		}),
		unavailCount: map[resource.Key]int{},
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.sizes, c.unavailable)
	}
	return c
}

// Name implements reconcile.Core.
func (c *Core) Name() string { return "hostnames" }

// Watches implements reconcile.Core.
func (c *Core) Watches(k resource.Kind) bool {
	return k == resource.HostnameGenerator || slices.Contains(serviceKinds, k)
}

// Start implements reconcile.Core: a new term starts from nothing.
func (c *Core) Start(context.Context, reconcile.Env) error {
	c.engine = hostname.NewEngine(c.o.Zone)
	c.changed, c.ops = nil, nil
	clear(c.unavailCount)
	c.unavailable.Set(0)
	return nil
}

// Observe implements reconcile.Core.
func (c *Core) Observe(k resource.Key, obj *resource.Object) {
	if k.Kind == resource.HostnameGenerator {
		if obj != nil {
			c.setGenerator(obj)
		} else {
			c.engine.DeleteGenerator(k.Name)
		}
		return
	}
	if obj == nil {
		hk := resource.HostnameKey(k)
		addrs, _ := c.engine.Addresses(hk)
		for _, a := range addrs {
			if a.Available {
				c.record(history.Deleted(c.o.Zone, k, a.Hostname, ""))
			}
		}
		c.engine.DeleteService(hk)
		c.setUnavailable(k, 0)
		return
	}
	s := resource.HostnameServiceOf(obj)
	s.TagNames = hostname.ServiceTagNames(resource.ServiceTags(obj), c.o.ServiceTagDomain)
	c.engine.SetService(s)
	c.changed = append(c.changed, k)
}

func (c *Core) setGenerator(obj *resource.Object) {
	g, err := resource.HostnameGeneratorOf(obj)
	if err != nil {
		// Admission checks templates, so this is a generator stored by an
		// older version with other rules: it names nothing.
		c.o.Log.Warn("ignoring a HostnameGenerator that cannot be used", "name", obj.Name, "err", err)
		c.engine.DeleteGenerator(obj.Name)
		return
	}
	c.engine.SetGenerator(g)
}

// record queues a history event.
func (c *Core) record(e api.HistoryEvent) {
	op, err := history.Op(e)
	if err != nil {
		c.o.Log.Warn("cannot record a history event", "err", err)
		return
	}
	c.ops = append(c.ops, reconcile.Write{Op: op})
}

// Ops implements reconcile.Core: the history of deleted services' names.
func (c *Core) Ops(time.Time) []reconcile.Write {
	ops := c.ops
	c.ops = nil
	return ops
}

// Dirty implements reconcile.Core.
func (c *Core) Dirty() []resource.Key {
	keys := c.changed
	c.changed = nil
	for _, sk := range c.engine.TakeDirty() {
		keys = append(keys, resource.Key{Kind: resource.Kind(sk.Kind), Mesh: sk.Mesh, Name: sk.Name})
	}
	gens, svcs, hosts := c.engine.Sizes()
	c.sizes.WithLabelValues("generators").Set(float64(gens))
	c.sizes.WithLabelValues("services").Set(float64(svcs))
	c.sizes.WithLabelValues("hostnames").Set(float64(hosts))
	return keys
}

// patch is what the core owns of a status: the addresses.
var patch = store.StatusPatch{Fields: []string{"addresses"}}

// Owns implements reconcile.Core.
func (c *Core) Owns(k resource.Kind) store.StatusPatch {
	if slices.Contains(serviceKinds, k) {
		return patch
	}
	return store.StatusPatch{}
}

// Decide implements reconcile.Core.
func (c *Core) Decide(obj *resource.Object, st resource.Status) []store.Op {
	addrs, _ := c.engine.Addresses(resource.HostnameKey(obj.Key()))
	want := c.toAddresses(obj, addrs)
	c.setUnavailable(obj.Key(), countUnavailable(want))
	st.(resource.ServiceStatusOf).Service().Addresses = want
	return nil
}

// Sum implements reconcile.Core.
func (c *Core) Sum(d *reconcile.Digest, st resource.Status) {
	s, ok := st.(resource.ServiceStatusOf)
	if !ok || s == nil {
		return
	}
	for _, a := range s.Service().Addresses {
		d.String(a.Hostname)
		d.String(a.Status)
		d.String(a.Origin.Kind)
		d.String(a.Origin.Name)
		d.String(a.Reason)
	}
	d.String("") // a hostname is never empty: this ends the list
}

func (c *Core) setUnavailable(k resource.Key, n int) {
	old := c.unavailCount[k]
	if n == old {
		return
	}
	if n == 0 {
		delete(c.unavailCount, k)
	} else {
		c.unavailCount[k] = n
	}
	c.unavailable.Add(float64(n - old))
}

func countUnavailable(addrs []resource.Address) int {
	n := 0
	for _, a := range addrs {
		if a.Status != resource.AddressAvailable {
			n++
		}
	}
	return n
}

// toAddresses converts the engine's addresses of obj to status.addresses.
func (c *Core) toAddresses(obj *resource.Object, addrs []hostname.Address) []resource.Address {
	if len(addrs) == 0 {
		return nil
	}
	var tags []hostname.TagName // the tag of each service-tag name, when asked for
	out := make([]resource.Address, len(addrs))
	for i, a := range addrs {
		status := resource.AddressNotAvailable
		if a.Available {
			status = resource.AddressAvailable
		}
		var origin resource.AddressOrigin
		switch a.Source {
		case hostname.InternalVIP:
			origin = resource.AddressOrigin{Kind: resource.OriginInternalVIP, Name: obj.Name}
		case hostname.ServiceTag, hostname.ServiceTagAlias:
			if tags == nil {
				tags = hostname.ServiceTagNames(resource.ServiceTags(obj), c.o.ServiceTagDomain)
			}
			origin.Kind = resource.OriginServiceTag
			if a.Source == hostname.ServiceTagAlias {
				origin.Kind = resource.OriginServiceTagAlias
			}
			if j := slices.IndexFunc(tags, func(n hostname.TagName) bool { return n.Host == a.Hostname }); j >= 0 {
				origin.Name = tags[j].Tag
			}
		default:
			origin = resource.AddressOrigin{Kind: OriginKind, Name: a.Generator}
		}
		out[i] = resource.Address{Hostname: a.Hostname, Status: status, Origin: origin, Reason: a.Reason}
	}
	return out
}
