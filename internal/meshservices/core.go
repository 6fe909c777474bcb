// Package meshservices synthesises MeshServices from Dataplanes in universal
// mode (seeds 002 and 004; ARCHITECTURE.md sections 2 and 6): one per mesh
// and distinct kuma.io/service inbound tag, named by the tag when it is a
// DNS-1035 label and by a compliant form otherwise, with the ports of the
// oldest Dataplane, the export mode from the kuma.io/export-mode tag or the
// configured default, and the tag as a ServiceTag identity (so that DNS
// answers frontend_default_svc_80.mesh and its aliases).
//
// Only MeshServices labelled kuma.io/managed-by: meshservice-generator are
// ever changed or deleted; a tag whose name is held by an operator's
// MeshService is reported and left without one. A MeshService whose last
// Dataplane went away carries the label kuma.io/deletion-grace-period-
// started-at and is deleted when the grace period ends, unless a Dataplane
// returns; the label is in the store, so the period survives restarts and
// leader changes.
//
// The pure planning is in plan.go and names.go; this file's Core keeps the
// indexes that make it incremental (a change re-plans only the tags it
// touches) and hands the plans' writes to the shared runner of
// internal/reconcile. It reads the Dataplanes and MeshServices of a unit
// from the cache when it plans, so that it keeps only their names. It runs
// only on the leader and imports api, resource, store, cache, reconcile
// and validate.
package meshservices

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Retry delays after a write failed: a conflict means someone else wrote
// meanwhile (plan again soon, on fresh state), an error that the store had
// a problem.
const (
	retryDelay = 50 * time.Millisecond
	errorDelay = time.Second
)

// CoreOptions configures a Core.
type CoreOptions struct {
	Options
	Log        *slog.Logger
	Registerer prometheus.Registerer
}

// Core keeps the MeshServices of Dataplanes.
type Core struct {
	reconcile.Base
	o     CoreOptions
	cache *cache.Cache
	st    *state
	// units are to be planned at the next Ops; retry when to plan a unit
	// again after a failed write.
	units map[Unit]struct{}
	retry map[Unit]time.Time

	writes  *prometheus.CounterVec
	blocked prometheus.Gauge
	pending prometheus.Gauge
}

// New returns a core; it does no I/O.
func New(o CoreOptions) *Core {
	c := &Core{
		o: o,
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_meshservices_writes_total", Help: "Writes of synthesised MeshServices by operation and result (ok, conflict, error).",
		}, []string{"op", "result"}),
		blocked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_meshservices_blocked_tags", Help: "kuma.io/service tags without a MeshService because a MeshService not managed by meshnames holds the name.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_meshservices_pending_deletion", Help: "Synthesised MeshServices without Dataplanes, waiting for the grace period to end.",
		}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.writes, c.blocked, c.pending)
	}
	return c
}

// Name implements reconcile.Core.
func (c *Core) Name() string { return "meshservices" }

// Watches implements reconcile.Core.
func (c *Core) Watches(k resource.Kind) bool {
	return k == resource.Dataplane || k == resource.MeshService
}

// Start implements reconcile.Core. A new term starts from nothing: so do
// the gauges it keeps by deltas.
func (c *Core) Start(_ context.Context, env reconcile.Env) error {
	c.cache = env.Cache
	c.st = newState()
	c.units = map[Unit]struct{}{}
	c.retry = map[Unit]time.Time{}
	c.blocked.Set(0)
	c.pending.Set(0)
	return nil
}

// Observe implements reconcile.Core.
func (c *Core) Observe(k resource.Key, obj *resource.Object) {
	for _, u := range c.reindex(k, obj) {
		c.units[u] = struct{}{}
	}
}

// Wake implements reconcile.Core: the next end of a grace period, or retry.
func (c *Core) Wake() time.Time {
	var next time.Time
	for _, m := range []map[Unit]time.Time{c.st.wake, c.retry} {
		for _, t := range m {
			if next.IsZero() || t.Before(next) {
				next = t
			}
		}
	}
	return next
}

// Ops implements reconcile.Core: it plans every unit a change touched,
// whose grace period ended, or whose write is to be retried.
func (c *Core) Ops(now time.Time) []reconcile.Write {
	for _, m := range []map[Unit]time.Time{c.st.wake, c.retry} {
		for u, t := range m {
			if !t.After(now) {
				delete(m, u)
				c.units[u] = struct{}{}
			}
		}
	}
	sorted := make([]Unit, 0, len(c.units))
	for u := range c.units {
		sorted = append(sorted, u)
	}
	// A new map rather than clear: clear keeps the buckets of the largest
	// pass (the first, with a unit per service), and every later pass would
	// walk them, however few units are dirty.
	c.units = make(map[Unit]struct{})
	slices.SortFunc(sorted, func(a, b Unit) int { return cmp.Or(cmp.Compare(a.Mesh, b.Mesh), cmp.Compare(a.Base, b.Base)) })
	var out []reconcile.Write
	for _, u := range sorted {
		p := PlanUnit(c.input(u), c.o.Options, now)
		c.remember(u, p)
		for _, op := range p.Ops {
			out = append(out, reconcile.Write{Op: op, Done: c.done(u, op.Type, now)})
		}
	}
	return out
}

// done returns what to do with the result of a write of unit u: count it,
// and plan the unit again when it failed.
func (c *Core) done(u Unit, t store.OpType, now time.Time) func(store.Result) {
	return func(r store.Result) {
		switch {
		case r.Err == nil:
			c.writes.WithLabelValues(t.String(), "ok").Inc()
		case errors.Is(r.Err, store.ErrConflict), errors.Is(r.Err, store.ErrAlreadyExists), errors.Is(r.Err, store.ErrNotFound):
			// Someone else wrote meanwhile; plan again on fresh state.
			c.writes.WithLabelValues(t.String(), "conflict").Inc()
			c.retry[u] = now.Add(retryDelay)
		default:
			c.writes.WithLabelValues(t.String(), "error").Inc()
			c.o.Log.Warn("writing a MeshService failed; will retry", "op", t, "unit", u.Base, "mesh", u.Mesh, "err", r.Err)
			c.retry[u] = now.Add(errorDelay)
		}
	}
}

// state is what one leadership term knows: which units each Dataplane and
// managed MeshService belongs to, and what each unit's last plan reported.
type state struct {
	dpUnits map[resource.Key][]Unit
	unitDPs map[Unit]map[string]struct{}
	msUnit  map[resource.Key]Unit
	unitMS  map[Unit]map[string]struct{}
	// watch: MeshServices (not managed here) that keep a unit's tag from
	// its name; unitWatch is the reverse, to forget them.
	watch     map[resource.Key]map[Unit]struct{}
	unitWatch map[Unit][]resource.Key
	// blocked tags of each unit with the reason, for logging a change once.
	blocked map[Unit]map[string]string
	pending map[Unit]int
	wake    map[Unit]time.Time
}

func newState() *state {
	return &state{
		dpUnits: map[resource.Key][]Unit{}, unitDPs: map[Unit]map[string]struct{}{},
		msUnit: map[resource.Key]Unit{}, unitMS: map[Unit]map[string]struct{}{},
		watch: map[resource.Key]map[Unit]struct{}{}, unitWatch: map[Unit][]resource.Key{},
		blocked: map[Unit]map[string]string{}, pending: map[Unit]int{}, wake: map[Unit]time.Time{},
	}
}

// reindex updates the indexes for a changed resource, obj (nil when
// deleted), and returns the units whose plan it may change: those it
// belonged to and belongs to now.
func (c *Core) reindex(k resource.Key, obj *resource.Object) []Unit {
	st := c.st
	var out []Unit
	switch k.Kind {
	case resource.Dataplane:
		for _, u := range st.dpUnits[k] {
			delete(st.unitDPs[u], k.Name)
			if len(st.unitDPs[u]) == 0 {
				delete(st.unitDPs, u)
			}
			out = append(out, u)
		}
		delete(st.dpUnits, k)
		if obj == nil {
			return out
		}
		var now []Unit
		for _, inb := range obj.Spec.(*resource.DataplaneSpec).Networking.Inbound {
			tag := inb.Tags[resource.TagService]
			if tag == "" {
				continue // a Kuma 3.x inbound: no tag, no synthesised service
			}
			u := Unit{Mesh: k.Mesh, Base: Compliant(tag)}
			if !slices.Contains(now, u) {
				now = append(now, u)
			}
		}
		for _, u := range now {
			addTo(st.unitDPs, u, k.Name)
		}
		if len(now) > 0 {
			st.dpUnits[k] = now
		}
		return append(out, now...)
	case resource.MeshService:
		if u, ok := st.msUnit[k]; ok {
			delete(st.unitMS[u], k.Name)
			if len(st.unitMS[u]) == 0 {
				delete(st.unitMS, u)
			}
			delete(st.msUnit, k)
			out = append(out, u)
		}
		for u := range st.watch[k] {
			out = append(out, u)
		}
		// A MeshService named like a unit's base may hold that unit's name.
		out = append(out, Unit{Mesh: k.Mesh, Base: k.Name})
		if obj != nil && Managed(obj) {
			if tag := identityTag(obj); tag != "" {
				u := Unit{Mesh: k.Mesh, Base: Compliant(tag)}
				st.msUnit[k] = u
				addTo(st.unitMS, u, k.Name)
				out = append(out, u)
			}
		}
	}
	return out
}

func addTo(m map[Unit]map[string]struct{}, u Unit, name string) {
	s := m[u]
	if s == nil {
		s = map[string]struct{}{}
		m[u] = s
	}
	s[name] = struct{}{}
}

// input gathers a unit's Dataplanes and managed MeshServices from the cache.
func (c *Core) input(u Unit) Input {
	st := c.st
	in := Input{Unit: u, Lookup: func(name string) *resource.Object {
		o, _ := c.cache.Get(resource.Key{Kind: resource.MeshService, Mesh: u.Mesh, Name: name})
		return o
	}}
	for name := range st.unitDPs[u] {
		if o, ok := c.cache.Get(resource.Key{Kind: resource.Dataplane, Mesh: u.Mesh, Name: name}); ok {
			in.Dataplanes = append(in.Dataplanes, o)
		}
	}
	for name := range st.unitMS[u] {
		if o, ok := c.cache.Get(resource.Key{Kind: resource.MeshService, Mesh: u.Mesh, Name: name}); ok {
			in.Managed = append(in.Managed, o)
		}
	}
	return in
}

// remember records what a plan reported: the MeshServices to watch, the
// blocked tags (logged when they change), the pending deletions and when to
// plan again.
func (c *Core) remember(u Unit, p Plan) {
	st := c.st
	for _, k := range st.unitWatch[u] {
		delete(st.watch[k], u)
		if len(st.watch[k]) == 0 {
			delete(st.watch, k)
		}
	}
	delete(st.unitWatch, u)
	for _, name := range p.Blockers {
		k := resource.Key{Kind: resource.MeshService, Mesh: u.Mesh, Name: name}
		if st.watch[k] == nil {
			st.watch[k] = map[Unit]struct{}{}
		}
		st.watch[k][u] = struct{}{}
		st.unitWatch[u] = append(st.unitWatch[u], k)
	}

	blocked := map[string]string{}
	pending := 0
	for _, s := range p.Services {
		if s.Blocked != "" {
			blocked[s.Tag] = s.Blocked
			if st.blocked[u][s.Tag] != s.Blocked {
				c.o.Log.Warn("a kuma.io/service tag has no MeshService", "mesh", u.Mesh, "tag", s.Tag, "dataplanes", s.Dataplanes, "reason", s.Blocked)
			}
		}
		if !s.DeletionAt.IsZero() {
			pending++
		}
	}
	c.blocked.Add(float64(len(blocked) - len(st.blocked[u])))
	c.pending.Add(float64(pending - st.pending[u]))
	if len(blocked) > 0 {
		st.blocked[u] = blocked
	} else {
		delete(st.blocked, u)
	}
	if pending > 0 {
		st.pending[u] = pending
	} else {
		delete(st.pending, u)
	}

	if p.Wake.IsZero() {
		delete(st.wake, u)
	} else {
		st.wake[u] = p.Wake
	}
}
