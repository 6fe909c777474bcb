// Package vips is the controller that gives services virtual IPs (seeds 000,
// 002, 003; ARCHITECTURE.md section 5): one address per family from the
// pool of the service's kind for MeshServices and MeshMultiZoneServices, and
// one per InternalVIP match (carrying its hostname) for
// MeshExternalServices, written into status.vips.
//
// Pools are shared by all meshes, so a VIP names one service in a zone. A
// VIP never changes while its service exists; an address already in status
// (a Kubernetes ClusterIP, or a VIP from a pool since reconfigured) is kept.
// A released VIP is quarantined: it is not handed out again for the
// quarantine period, so that no client still resolving the old name reaches
// a new service.
//
// A MeshService made from a Kubernetes Service gets the addresses
// Kubernetes gave it (its ClusterIPs, or its Pod's IPs), which the
// Kubernetes controller hands over (SetPlatformVIPs); this core allocates
// none for it, and is the one writer of status.vips all the same.
//
// Both allocations and quarantines are recorded as store leases named
// "vip/<ip>", written in the same transaction as the status that shows the
// VIP, so they survive restarts and leader changes. When the controller
// starts it rebuilds its pools from statuses and leases; an allocation lease
// whose service is gone (deleted while no controller ran) is quarantined
// from that moment, never shorter.
//
// Exhaustion is a condition on the services that could not get an address
// and a metric; the core asks again when addresses are released or leave
// quarantine, and never spins.
//
// Core is the VIP planner for the shared runner of internal/reconcile: it
// is told which services changed and decides their status.vips and the
// VIPsAllocated condition, with the leases that must commit with them; it
// reads no cache and no clock of its own. Usage tells readers on every
// instance how the pools are used. It imports api, history, resource,
// store, ipam and reconcile.
package vips

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/ipam"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// LeasePrefix starts the name of every VIP lease; CursorLeasePrefix the
// lease holding each pool's allocation cursor.
const (
	LeasePrefix       = "vip/"
	CursorLeasePrefix = "vipcursor/"
)

var serviceKinds = []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService}

// Prefixes are the pools of one kind: an IPv4 prefix and, optionally, an
// IPv6 one (invalid when not configured).
type Prefixes struct {
	V4, V6 netip.Prefix
}

// Options configures a Core.
type Options struct {
	// Zone is this control plane's, for the history of addresses.
	Zone string
	// Pools by kind; every service kind must have a V4 pool.
	Pools      map[resource.Kind]Prefixes
	Quarantine time.Duration
	Log        *slog.Logger
	Registerer prometheus.Registerer
	// Usage, when set, receives the pools' figures after every pass, for
	// readers on this instance (the GUI); nil for none (a preview's cores).
	Usage *Usage
}

// Core decides status.vips.
type Core struct {
	reconcile.Base
	o   Options
	now func() time.Time
	st  *state
	// loading is set from Start to the first Dirty: Observe then reserves
	// what statuses show, and leases holds the stored leases, which the
	// first Dirty reconciles with what is in use.
	loading bool
	leases  []store.Lease
	holder  map[netip.Addr]resource.Key
	dirty   []resource.Key
	ops     []reconcile.Write

	// platform holds the VIPs the platform gave MeshServices made from
	// Kubernetes Services (SetPlatformVIPs) until their status shows them
	// (settled), packed (packVIPs): after that the status is what Decide
	// writes again, so a cluster's Services cost nothing here once named.
	// It is input from outside the runner: kept across terms, and locked.
	platformMu    sync.Mutex
	platform      map[resource.Key]string
	platformDirty []resource.Key

	allocations *prometheus.CounterVec
	failures    *prometheus.CounterVec
	poolGauge   *prometheus.GaugeVec
}

// New returns a core; it does no I/O.
func New(o Options) *Core {
	c := &Core{
		o: o,
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_vips_allocations_total", Help: "VIPs handed out, by pool.",
		}, []string{"pool"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_vips_allocation_failures_total", Help: "VIPs that could not be handed out because the pool was exhausted, by pool.",
		}, []string{"pool"}),
		poolGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_vips_pool_addresses", Help: "Addresses of each pool: size, used, quarantined.",
		}, []string{"pool", "state"}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.allocations, c.failures, c.poolGauge)
	}
	return c
}

// Name implements reconcile.Core.
func (c *Core) Name() string { return "vips" }

// Watches implements reconcile.Core.
func (c *Core) Watches(k resource.Kind) bool { return slices.Contains(serviceKinds, k) }

// Start implements reconcile.Core: it builds empty pools and reads the
// leases of allocations, quarantines and cursors.
func (c *Core) Start(ctx context.Context, env reconcile.Env) error {
	c.now = env.Now
	st, err := newState(c.o, env.Now)
	if err != nil {
		return err
	}
	c.st, c.dirty, c.ops = st, nil, nil
	cursors, err := env.Store.Leases(ctx, CursorLeasePrefix)
	if err != nil {
		return err
	}
	for _, l := range cursors {
		for _, fams := range st.families {
			for _, f := range fams {
				ip, err := netip.ParseAddr(string(l.Value))
				if l.Name == CursorLeasePrefix+f.name && err == nil && f.pool.SetCursor(ip) == nil {
					f.cursor = ip
				}
			}
		}
	}
	if c.leases, err = env.Store.Leases(ctx, LeasePrefix); err != nil {
		return err
	}
	c.loading = true
	c.holder = map[netip.Addr]resource.Key{}
	return nil
}

func newState(o Options, now func() time.Time) (*state, error) {
	st := &state{
		now: now, q: o.Quarantine,
		families: map[resource.Kind][]*family{},
		owned:    map[resource.Key][]vip{},
		waiting:  map[resource.Key]struct{}{},
	}
	for _, k := range serviceKinds {
		prefixes, ok := o.Pools[k]
		if !ok || !prefixes.V4.IsValid() {
			return nil, fmt.Errorf("vips: no IPv4 pool for %s", k)
		}
		for _, p := range []netip.Prefix{prefixes.V4, prefixes.V6} {
			if !p.IsValid() {
				continue
			}
			pool, err := ipam.NewPool(p)
			if err != nil {
				return nil, fmt.Errorf("vips: pool %s of %s: %w", p, k, err)
			}
			st.families[k] = append(st.families[k], &family{name: p.String(), v6: p.Addr().Is6(), pool: pool})
		}
	}
	return st, nil
}

// Observe implements reconcile.Core.
func (c *Core) Observe(k resource.Key, obj *resource.Object) {
	if obj != nil {
		c.settled(k, obj)
	}
	switch {
	case c.loading && obj != nil:
		c.load(obj)
	case obj == nil:
		// Deleted: quarantine everything it held.
		for _, v := range c.st.owned[k] {
			if op, ok := c.releaseOp(k, v, c.now()); ok {
				c.ops = append(c.ops, reconcile.Write{Op: op})
			}
			if op, err := history.Op(history.Deleted(c.o.Zone, k, "", v.ip.String())); err == nil {
				c.ops = append(c.ops, reconcile.Write{Op: op})
			}
		}
		delete(c.st.owned, k)
		delete(c.st.waiting, k)
		return
	}
	c.dirty = append(c.dirty, k)
}

// load takes in the VIPs the status of obj shows, at the start of a term.
func (c *Core) load(obj *resource.Object) {
	st := c.st
	var vs []vip
	for _, v := range statusVIPs(obj) {
		ip, err := netip.ParseAddr(v.IP)
		if err != nil {
			continue // Decide drops it
		}
		if f := st.findFamily(ip); f != nil {
			if other, taken := c.holder[ip]; taken {
				c.o.Log.Warn("two services show the same VIP; the second will get a new one", "ip", ip, "name", obj.Name, "kind", obj.Kind, "mesh", obj.Mesh, "holder", other.String())
				continue
			}
			if err := f.pool.Reserve(ip); err != nil {
				c.o.Log.Warn("cannot reserve a VIP shown in status", "ip", ip, "name", obj.Name, "err", err)
				continue
			}
			c.holder[ip] = obj.Key()
		}
		vs = append(vs, newVIP(ip, v.Type, v.Hostname))
	}
	if vs != nil {
		st.owned[obj.Key()] = exact(vs)
	}
}

// loaded reconciles the stored leases with the addresses in use, once the
// first view of a term is complete: an allocation whose service is gone
// (deleted while no controller ran) is quarantined from now, never
// shorter; ended quarantines and leases of no address are deleted.
func (c *Core) loaded() {
	st := c.st
	now := st.now()
	for _, l := range c.leases {
		ip, err := netip.ParseAddr(l.Name[len(LeasePrefix):])
		if err != nil {
			c.ops = append(c.ops, reconcile.Write{Op: store.Op{Type: store.OpDeleteLease, Lease: &store.Lease{Name: l.Name}}})
			continue
		}
		if _, live := c.holder[ip]; live {
			continue // in use; its allocation lease stays
		}
		f := st.findFamily(ip)
		until := l.ExpiresAt
		if until.IsZero() {
			// An allocation whose service is gone: it was released while
			// no controller ran, at a moment we do not know. Quarantine
			// from now, which is never shorter than required.
			until = now.Add(st.q)
			var val leaseValue
			_ = json.Unmarshal(l.Value, &val)
			val.Released = true
			c.ops = append(c.ops, reconcile.Write{Op: putLease(ip, val, until)})
		}
		if !until.After(now) || f == nil {
			c.ops = append(c.ops, reconcile.Write{Op: store.Op{Type: store.OpDeleteLease, Lease: &store.Lease{Name: l.Name}}})
			continue
		}
		if err := f.pool.Quarantine(ip, until); err != nil {
			c.o.Log.Warn("cannot restore a quarantined VIP", "ip", ip, "err", err)
		}
	}
	c.leases, c.holder, c.loading = nil, nil, false
}

// Dirty implements reconcile.Core.
func (c *Core) Dirty() []resource.Key {
	if c.loading {
		c.loaded()
	}
	keys := c.dirty
	c.dirty = nil
	c.platformMu.Lock()
	keys = append(keys, c.platformDirty...)
	c.platformDirty = nil
	c.platformMu.Unlock()
	return keys
}

// SetPlatformVIPs records the addresses the platform gave MeshService k
// (a Kubernetes Service's ClusterIPs, or a headless Service's Pod's IPs)
// until k's status shows them; nil forgets them (k's status shows what to
// keep writing). The next pass writes them as k's VIPs: the Kubernetes
// controller calls it before it creates k, so that k's first status write
// already carries them, and kicks the runner. Safe for concurrent use.
func (c *Core) SetPlatformVIPs(k resource.Key, vips []resource.VIP) {
	c.platformMu.Lock()
	defer c.platformMu.Unlock()
	if vips == nil {
		delete(c.platform, k)
		if len(c.platform) == 0 {
			c.platform = nil
		}
		return
	}
	if c.platform == nil {
		c.platform = map[resource.Key]string{}
	}
	p := packVIPs(vips)
	if c.platform[k] == p {
		return
	}
	c.platform[k] = p
	c.platformDirty = append(c.platformDirty, k)
}

// settled forgets the VIPs handed over for k once obj, its current state,
// shows them in status; the map goes with its last entry (a map keeps
// its peak size).
func (c *Core) settled(k resource.Key, obj *resource.Object) {
	c.platformMu.Lock()
	defer c.platformMu.Unlock()
	if p, ok := c.platform[k]; ok && p == packVIPs(statusVIPs(obj)) {
		delete(c.platform, k)
		if len(c.platform) == 0 {
			c.platform = nil
		}
	}
}

// platformVIPs returns the VIPs of platform-addressed service obj: those
// SetPlatformVIPs gave, else what its status shows.
func (c *Core) platformVIPs(obj *resource.Object) []resource.VIP {
	c.platformMu.Lock()
	defer c.platformMu.Unlock()
	if p, ok := c.platform[obj.Key()]; ok {
		return unpackVIPs(p)
	}
	return slices.Clone(statusVIPs(obj))
}

// packVIPs packs VIPs into one string, each field followed by a NUL
// (addresses, types and DNS names hold none): the core keeps the VIPs of
// every MeshService made from a Kubernetes Service, and one string is one
// allocation of about 24 bytes where a slice of VIPs is two of 64.
func packVIPs(vips []resource.VIP) string {
	var b strings.Builder
	for _, v := range vips {
		for _, f := range [...]string{v.IP, v.Type, v.Hostname} {
			b.WriteString(f)
			b.WriteByte(0)
		}
	}
	return b.String()
}

// unpackVIPs returns the VIPs packVIPs packed into p: not nil, even when
// there are none.
func unpackVIPs(p string) []resource.VIP {
	out := make([]resource.VIP, 0, strings.Count(p, "\x00")/3)
	for p != "" {
		var v resource.VIP
		v.IP, p, _ = strings.Cut(p, "\x00")
		v.Type, p, _ = strings.Cut(p, "\x00")
		v.Hostname, p, _ = strings.Cut(p, "\x00")
		out = append(out, v)
	}
	return out
}

// Ops implements reconcile.Core: the leases of released addresses, and of
// quarantines that ended; services waiting for an address are asked again
// when some left quarantine.
func (c *Core) Ops(now time.Time) []reconcile.Write {
	if c.loading {
		c.loaded()
	}
	ops := c.ops
	c.ops = nil
	ended := 0
	for _, fams := range c.st.families {
		for _, f := range fams {
			for _, ip := range f.pool.Expire(now) {
				ops = append(ops, reconcile.Write{Op: store.Op{Type: store.OpDeleteLease, Lease: &store.Lease{Name: leaseName(ip)}}})
				ended++
			}
		}
	}
	if ended > 0 {
		for k := range c.st.waiting {
			c.dirty = append(c.dirty, k)
		}
	}
	c.updateGauges()
	return ops
}

// Wake implements reconcile.Core: the end of the first quarantine.
func (c *Core) Wake() time.Time {
	var next time.Time
	for _, fams := range c.st.families {
		for _, f := range fams {
			if t, ok := f.pool.NextExpiry(); ok && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}

// BeforeFlush implements reconcile.Flusher: each batch carries the pool
// cursors as they stand after it, and the pools' figures are reported as
// they stand with it.
func (c *Core) BeforeFlush() []store.Op {
	c.updateGauges()
	var ops []store.Op
	for _, fams := range c.st.families {
		for _, f := range fams {
			if cur := f.pool.Cursor(); cur != f.cursor {
				f.cursor = cur
				ops = append(ops, store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: CursorLeasePrefix + f.name, Value: []byte(cur.String())}})
			}
		}
	}
	return ops
}

// patch is what the core owns of a status: the VIPs and the exhaustion
// condition.
var patch = store.StatusPatch{Fields: []string{"vips"}, Conditions: []string{resource.ConditionVIPsAllocated}}

// Owns implements reconcile.Core.
func (c *Core) Owns(k resource.Kind) store.StatusPatch {
	if slices.Contains(serviceKinds, k) {
		return patch
	}
	return store.StatusPatch{}
}

// Sum implements reconcile.Core.
func (c *Core) Sum(d *reconcile.Digest, st resource.Status) {
	s, ok := st.(resource.ServiceStatusOf)
	if !ok || s == nil {
		return
	}
	for _, v := range s.Service().VIPs {
		d.String(v.IP)
		d.String(v.Type)
		d.String(v.Hostname)
	}
	d.String("") // a VIP has a non-empty IP: this ends the list
	for _, cond := range s.Service().Conditions {
		if cond.Type == resource.ConditionVIPsAllocated {
			d.String(cond.Status)
			d.String(cond.Reason)
			d.String(cond.Message)
		}
	}
}

// updateGauges reports the pools' figures as metrics and to Options.Usage.
func (c *Core) updateGauges() {
	now := c.st.now()
	var usage []api.VIPPool
	if c.o.Usage != nil {
		usage = emptyPools(c.o.Pools)
	}
	for _, fams := range c.st.families {
		for _, f := range fams {
			size, used, quarantined := f.pool.Stats(now)
			c.poolGauge.WithLabelValues(f.name, "size").Set(float64(size))
			c.poolGauge.WithLabelValues(f.name, "used").Set(float64(used))
			c.poolGauge.WithLabelValues(f.name, "quarantined").Set(float64(quarantined))
			for i := range usage {
				if usage[i].Prefix.String() == f.name {
					usage[i].Used, usage[i].Quarantined = used, quarantined
				}
			}
		}
	}
	if c.o.Usage != nil {
		c.o.Usage.publish(usage)
	}
}
