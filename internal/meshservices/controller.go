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
// The pure planning is in plan.go and names.go; this file keeps the indexes
// that make it incremental (a change re-plans only the tags it touches) and
// writes the plans. It runs only on the leader and imports resource, store,
// cache and reconcile.
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

const retryDelay = 50 * time.Millisecond

// ControllerOptions configures a Controller.
type ControllerOptions struct {
	Options
	Cache *cache.Cache
	Store store.Store
	// Now is the clock (time.Now when nil).
	Now        func() time.Time
	Log        *slog.Logger
	Registerer prometheus.Registerer
	// BatchSize bounds the writes of one transaction (500 when 0).
	BatchSize int
}

// Controller keeps the MeshServices of Dataplanes.
type Controller struct {
	o       ControllerOptions
	writes  *prometheus.CounterVec
	blocked prometheus.Gauge
	pending prometheus.Gauge
}

// New returns a controller; it does no I/O.
func New(o ControllerOptions) *Controller {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	c := &Controller{
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

// item is a unit of work: a changed resource, or a unit to plan again (a
// retry or the end of a grace period).
type item struct {
	key  resource.Key
	unit Unit
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

// Run keeps the MeshServices in step until ctx ends. Call it only while
// leading.
func (c *Controller) Run(ctx context.Context) error {
	q := reconcile.New[item]()
	defer q.Close()
	cancel := c.o.Cache.Subscribe(func(keys []resource.Key) {
		for _, k := range keys {
			if k.Kind == resource.Dataplane || k.Kind == resource.MeshService {
				q.Add(item{key: k})
			}
		}
	})
	defer cancel()
	if !c.o.Cache.WaitSynced(ctx) {
		return nil
	}
	// A new term starts from nothing: so do the gauges it keeps by deltas.
	st := newState()
	c.blocked.Set(0)
	c.pending.Set(0)
	var all []item
	for _, k := range []resource.Kind{resource.Dataplane, resource.MeshService} {
		for _, k := range c.o.Cache.Keys(cache.Query{Kind: k}) {
			all = append(all, item{key: k})
		}
	}
	start := time.Now()
	c.process(ctx, st, q, all)
	c.o.Log.Info("meshservices controller started", "resources", len(all), "dur", time.Since(start))
	for {
		items := q.Next(ctx)
		if items == nil {
			return nil
		}
		c.process(ctx, st, q, items)
	}
}

// process re-indexes the changed resources, plans every unit they touch and
// writes the plans.
func (c *Controller) process(ctx context.Context, st *state, q *reconcile.Queue[item], items []item) {
	units := map[Unit]struct{}{}
	for _, it := range items {
		if it.key.Kind == "" {
			// A wake-up: forget it, so that the plan schedules the next.
			delete(st.wake, it.unit)
			units[it.unit] = struct{}{}
			continue
		}
		for _, u := range c.reindex(st, it.key) {
			units[u] = struct{}{}
		}
	}
	sorted := make([]Unit, 0, len(units))
	for u := range units {
		sorted = append(sorted, u)
	}
	slices.SortFunc(sorted, func(a, b Unit) int { return cmp.Or(cmp.Compare(a.Mesh, b.Mesh), cmp.Compare(a.Base, b.Base)) })

	now := c.o.Now()
	var ops []store.Op
	var opUnits []Unit
	for _, u := range sorted {
		p := PlanUnit(c.input(st, u), c.o.Options, now)
		c.remember(st, q, u, p, now)
		for _, op := range p.Ops {
			ops = append(ops, op)
			opUnits = append(opUnits, u)
		}
	}
	c.write(ctx, q, ops, opUnits)
}

// reindex updates the indexes for a changed resource and returns the units
// whose plan it may change: those it belonged to and belongs to now.
func (c *Controller) reindex(st *state, k resource.Key) []Unit {
	var out []Unit
	switch k.Kind {
	case resource.Dataplane:
		obj, _ := c.o.Cache.Peek(k) // read only
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
		// Most MeshServices are not managed: look at the label before
		// reading the rest (a resource frozen in the cache is decoded).
		if v, _ := c.o.Cache.Label(k, resource.LabelManagedBy); v != resource.ManagedByMeshServices {
			break
		}
		if obj, ok := c.o.Cache.Peek(k); ok && Managed(obj) { // read only
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
func (c *Controller) input(st *state, u Unit) Input {
	in := Input{Unit: u, Lookup: func(name string) *resource.Object {
		o, _ := c.o.Cache.Get(resource.Key{Kind: resource.MeshService, Mesh: u.Mesh, Name: name})
		return o
	}}
	for name := range st.unitDPs[u] {
		if o, ok := c.o.Cache.Get(resource.Key{Kind: resource.Dataplane, Mesh: u.Mesh, Name: name}); ok {
			in.Dataplanes = append(in.Dataplanes, o)
		}
	}
	for name := range st.unitMS[u] {
		if o, ok := c.o.Cache.Get(resource.Key{Kind: resource.MeshService, Mesh: u.Mesh, Name: name}); ok {
			in.Managed = append(in.Managed, o)
		}
	}
	return in
}

// remember records what a plan reported: the MeshServices to watch, the
// blocked tags (logged when they change), the pending deletions and when to
// plan again.
func (c *Controller) remember(st *state, q *reconcile.Queue[item], u Unit, p Plan, now time.Time) {
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
	} else if !st.wake[u].Equal(p.Wake) {
		st.wake[u] = p.Wake
		q.AddAfter(max(p.Wake.Sub(now), 0), item{unit: u})
	}
}

// write commits ops in batches; a failed write plans its unit again.
func (c *Controller) write(ctx context.Context, q *reconcile.Queue[item], ops []store.Op, units []Unit) {
	for len(ops) > 0 {
		n := min(len(ops), c.o.BatchSize)
		batch, batchUnits := ops[:n], units[:n]
		ops, units = ops[n:], units[n:]
		results, err := c.o.Store.Apply(ctx, batch...)
		if err != nil {
			if errors.Is(err, store.ErrFenced) {
				// Another instance leads: our work is being stopped, and the
				// new leader plans these units again.
				c.o.Log.Info("no longer the leader: dropping the MeshService writes", "ops", len(batch)+len(ops))
				return
			}
			if ctx.Err() != nil {
				return
			}
			c.o.Log.Warn("writing MeshServices failed; will retry", "ops", len(batch), "err", err)
			for i, op := range batch {
				c.writes.WithLabelValues(op.Type.String(), "error").Inc()
				q.AddAfter(time.Second, item{unit: batchUnits[i]})
			}
			continue
		}
		for i, r := range results {
			op := batch[i]
			switch {
			case r.Err == nil:
				c.writes.WithLabelValues(op.Type.String(), "ok").Inc()
			case errors.Is(r.Err, store.ErrConflict), errors.Is(r.Err, store.ErrAlreadyExists), errors.Is(r.Err, store.ErrNotFound):
				// Someone else wrote meanwhile; plan again on fresh state.
				c.writes.WithLabelValues(op.Type.String(), "conflict").Inc()
				q.AddAfter(retryDelay, item{unit: batchUnits[i]})
			default:
				c.writes.WithLabelValues(op.Type.String(), "error").Inc()
				c.o.Log.Warn("writing a MeshService failed; will retry", "op", op.Type, "unit", batchUnits[i].Base, "mesh", batchUnits[i].Mesh, "err", r.Err)
				q.AddAfter(time.Second, item{unit: batchUnits[i]})
			}
		}
	}
}
