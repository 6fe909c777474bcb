// Package extsvc is the controller that reports MeshExternalServices whose
// IP and CIDR matches overlap on a port (seed 003, "IP intersections";
// ARCHITECTURE.md section 8). Such services cannot both get the traffic to
// the shared addresses, and validation cannot see it, since it looks at one
// document. For every overlapping pair the controller logs seed 003's
// sentence, with the real names and the shared range:
//
//	external-service1 and external-service2 have overlapping IPs 10.1.1.7, which can disrupt your traffic.
//
// and both services carry the condition Overlapping (status True, reason
// OverlappingIPs) naming the other, until the overlap ends.
//
// The work is incremental: the pure engine (overlaps.go) keeps an index per
// mesh and port and re-checks only the services a change meets. Statuses are
// written in batches, only where the condition changes. The controller owns
// the Overlapping condition and nothing else: it writes a status whose other
// fields it copied from the cache, and a concurrent write by the hostnames
// or vips controller is a version conflict that it retries.
//
// It runs only on the leader and rebuilds its state from the cache when it
// starts. It imports resource, store, cache and reconcile.
package extsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// The condition reported on overlapping external services.
const (
	ConditionOverlapping = "Overlapping"
	ReasonOverlappingIPs = "OverlappingIPs"
)

// maxListed bounds the overlaps a condition message spells out; a CIDR such
// as 0.0.0.0/0 may overlap every other external service of the mesh.
const maxListed = 5

// Defaults of Options.
const (
	DefaultResync    = 10 * time.Minute
	DefaultBatchSize = 500
	retryDelay       = 200 * time.Millisecond
)

// Options configures a Controller.
type Options struct {
	Cache *cache.Cache
	Store store.Store
	Log   *slog.Logger
	// Registerer receives the controller's metrics; nil for none.
	Registerer prometheus.Registerer
	// Resync is the period of the safety-net comparison of every status.
	Resync time.Duration
	// BatchSize bounds the status writes of one transaction.
	BatchSize int
}

// Controller writes the Overlapping condition of MeshExternalServices.
type Controller struct {
	o Options

	reconciles prometheus.Histogram
	writes     *prometheus.CounterVec
	pairs      prometheus.Gauge
}

// New returns a controller; it does no I/O.
func New(o Options) *Controller {
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	c := &Controller{
		o: o,
		reconciles: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "meshnames_extsvc_reconcile_duration_seconds", Help: "Time to process one batch of external service changes, writes included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_extsvc_status_writes_total", Help: "Status writes by result (ok, conflict, error).",
		}, []string{"result"}),
		pairs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_extsvc_overlapping_pairs", Help: "Pairs of external services whose IPs overlap on a port.",
		}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.reconciles, c.writes, c.pairs)
	}
	return c
}

// Run keeps the conditions up to date until ctx ends. Call it only while
// leading.
func (c *Controller) Run(ctx context.Context) error {
	q := reconcile.New[resource.Key]()
	defer q.Close()
	cancel := c.o.Cache.Subscribe(func(keys []resource.Key) {
		for _, k := range keys {
			if k.Kind == resource.MeshExternalService {
				q.Add(k)
			}
		}
	})
	defer cancel()
	for {
		if synced, _ := c.o.Cache.Status(); synced {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}

	start := time.Now()
	engine := NewEngine()
	var svcs []Service
	var all []resource.Key
	c.o.Cache.Scan(cache.Query{Kind: resource.MeshExternalService}, func(o *resource.Object) {
		svcs, all = append(svcs, ServiceOf(o)), append(all, o.Key())
	})
	engine.Load(svcs)
	c.flush(ctx, engine, q, all)
	c.o.Log.Info("external services controller started", "services", len(all), "overlapping_pairs", engine.Pairs(), "dur", time.Since(start))

	resync := time.NewTicker(c.o.Resync)
	defer resync.Stop()
	next := q.Batches(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
			c.flush(ctx, engine, q, c.o.Cache.Keys(cache.Query{Kind: resource.MeshExternalService}))
		case keys, ok := <-next:
			if !ok {
				return nil
			}
			start := time.Now()
			var present []resource.Key
			for _, k := range keys {
				if obj, ok := c.o.Cache.Get(k); ok {
					engine.Set(ServiceOf(obj))
					// The event may be a status write by another
					// controller, or a conflict retry: compare again.
					present = append(present, k)
				} else {
					engine.Delete(Key{k.Mesh, k.Name})
				}
			}
			c.flush(ctx, engine, q, present)
			c.reconciles.Observe(time.Since(start).Seconds())
		}
	}
}

// ServiceOf converts a MeshExternalService for the engine: the prefixes of
// its IP and CIDR matches, by port. Values that do not parse (stored under
// older rules) capture nothing.
func ServiceOf(obj *resource.Object) Service {
	s := Service{Key: Key{obj.Mesh, obj.Name}, Ranges: map[int][]netip.Prefix{}}
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
		default:
			continue
		}
		s.Ranges[m.Port] = append(s.Ranges[m.Port], p)
	}
	return s
}

// flush logs the pair changes, then writes the condition of every service
// the engine marked dirty, and of extra, where it differs from the status.
func (c *Controller) flush(ctx context.Context, engine *Engine, q *reconcile.Queue[resource.Key], extra []resource.Key) {
	for _, ev := range engine.TakeEvents() {
		if ev.Gone {
			c.o.Log.Info("external services no longer overlap", "mesh", ev.Mesh, "name", ev.A, "other", ev.B)
			continue
		}
		// seed 003's words, exactly.
		c.o.Log.Warn(Message(ev.A, ev.B, ev.IPs), "mesh", ev.Mesh, "ports", ev.Ports)
	}
	c.pairs.Set(float64(engine.Pairs()))
	keys := extra
	for _, k := range engine.TakeDirty() {
		keys = append(keys, resource.Key{Kind: resource.MeshExternalService, Mesh: k.Mesh, Name: k.Name})
	}
	slices.SortFunc(keys, func(a, b resource.Key) int { return strings.Compare(a.String(), b.String()) })
	keys = slices.Compact(keys)

	var ops []store.Op
	for _, k := range keys {
		obj, ok := c.o.Cache.Get(k)
		if !ok {
			continue
		}
		st := resource.ServiceStatusOrNew(obj)
		svc := st.Service()
		conds := withCondition(svc.Conditions, condition(obj.Name, engine.Overlaps(Key{k.Mesh, k.Name})))
		if slices.Equal(svc.Conditions, conds) {
			continue
		}
		svc.Conditions = conds
		obj.Status = st
		ops = append(ops, store.Op{Type: store.OpPatchStatus, Object: obj, Patch: statusPatch, DiscardObject: true})
	}
	for batch := range slices.Chunk(ops, c.o.BatchSize) {
		c.write(ctx, q, batch)
	}
}

// condition returns the Overlapping condition of a service with these
// overlaps, or nil when there are none.
func condition(name string, overlaps []Overlap) *resource.Condition {
	if len(overlaps) == 0 {
		return nil
	}
	var msg []string
	for _, o := range overlaps[:min(len(overlaps), maxListed)] {
		msg = append(msg, Message(name, o.Other, o.IPs))
	}
	if n := len(overlaps) - maxListed; n > 0 {
		msg = append(msg, fmt.Sprintf("And %d more external services.", n))
	}
	return &resource.Condition{Type: ConditionOverlapping, Status: resource.ConditionTrue, Reason: ReasonOverlappingIPs, Message: strings.Join(msg, " ")}
}

// withCondition sets or clears the Overlapping condition, leaving others.
func withCondition(conds []resource.Condition, c *resource.Condition) []resource.Condition {
	out := slices.DeleteFunc(slices.Clone(conds), func(x resource.Condition) bool { return x.Type == ConditionOverlapping })
	if c != nil {
		out = append(out, *c)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// statusPatch is what this controller owns of a status: its condition.
var statusPatch = &store.StatusPatch{Conditions: []string{ConditionOverlapping}}

func (c *Controller) write(ctx context.Context, q *reconcile.Queue[resource.Key], ops []store.Op) {
	results, err := c.o.Store.Apply(ctx, ops...)
	if err != nil {
		if errors.Is(err, store.ErrFenced) {
			// Another instance leads: our work is being stopped, and the
			// new leader computes these conditions again.
			c.o.Log.Info("no longer the leader: dropping the external service writes", "services", len(ops))
			return
		}
		if ctx.Err() == nil {
			c.o.Log.Warn("writing external service conditions failed; will retry", "services", len(ops), "err", err)
			c.writes.WithLabelValues("error").Add(float64(len(ops)))
			for _, op := range ops {
				q.AddAfter(retryDelay, op.Object.Key())
			}
		}
		return
	}
	for i, r := range results {
		k := ops[i].Object.Key()
		switch {
		case r.Err == nil:
			c.writes.WithLabelValues("ok").Inc()
		case errors.Is(r.Err, store.ErrNotFound):
			// Deleted meanwhile; the deletion event follows.
		case errors.Is(r.Err, store.ErrConflict):
			// Another controller wrote the status after our cache copy;
			// the retry re-reads it and compares again.
			c.writes.WithLabelValues("conflict").Inc()
			q.AddAfter(retryDelay, k)
		default:
			c.writes.WithLabelValues("error").Inc()
			c.o.Log.Warn("writing external service conditions failed; will retry", "kind", k.Kind, "mesh", k.Mesh, "name", k.Name, "err", r.Err)
			q.AddAfter(retryDelay, k)
		}
	}
}
