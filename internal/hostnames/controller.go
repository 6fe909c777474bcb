// Package hostnames is the controller that gives services their hostnames:
// it feeds HostnameGenerators and services from the cache into the pure
// engine of internal/hostname and writes each service's status.addresses
// (seeds 000 and 001). The InternalVIP values of MeshExternalServices (seed
// 003) are claimed in the same per-mesh index, before generated names, and
// listed in status.addresses with origin MeshExternalService, so that a
// clash shows on both sides and DNS answers only the holder. It also
// creates the default generators of seed 001.
//
// Work is event-driven: the cache tells the controller which keys changed,
// the engine re-renders only what a change can affect, and the statuses that
// differ from what is stored are written in batches, one transaction each.
// A slow resync compares every service again as a safety net.
//
// The controller runs only on the leader and rebuilds its state from the
// cache each time it starts. It owns status.addresses and nothing else: it
// writes a status whose other fields it copied from the current version,
// and a concurrent write by another controller is a version conflict that
// it retries.
//
// It imports resource, store, cache, hostname and reconcile.
package hostnames

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/hostname"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Defaults of Options.
const (
	DefaultResync    = 10 * time.Minute
	DefaultBatchSize = 500
	retryDelay       = 200 * time.Millisecond
)

// OriginKind is the origin kind of generated addresses.
const OriginKind = resource.OriginHostnameGenerator

// serviceKinds are the kinds that get hostnames.
var serviceKinds = []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService}

// Options configures a Controller.
type Options struct {
	Cache *cache.Cache
	Store store.Store
	// Zone is the local zone: the .Zone of services without kuma.io/zone.
	Zone string
	Log  *slog.Logger
	// Registerer receives the controller's metrics; nil for none.
	Registerer prometheus.Registerer
	// Resync is the period of the safety-net comparison of every service.
	Resync time.Duration
	// BatchSize bounds the status writes of one transaction.
	BatchSize int
	// Settled, when set, is called once, the first time the controller has
	// had nothing to do for a second after its first full pass (including
	// the echoes of its own writes).
	Settled func()
}

// Controller writes status.addresses.
type Controller struct {
	o Options

	reconciles   prometheus.Histogram
	writes       *prometheus.CounterVec
	sizes        *prometheus.GaugeVec
	unavailable  prometheus.Gauge
	unavailCount map[resource.Key]int
	// written is the digest of what this term wrote of each service's
	// addresses that the cache does not show yet: status patches do not
	// conflict, so a pass made before the echo arrives would otherwise
	// write them again.
	written reconcile.Inflight[resource.Key, uint64]
	digest  reconcile.Digest
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
			Name: "meshnames_hostnames_reconcile_duration_seconds", Help: "Time to process one batch of changes, writes included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_hostnames_status_writes_total", Help: "Status writes by result (ok, conflict, error).",
		}, []string{"result"}),
		sizes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_hostnames_objects", Help: "Generators, services and claimed hostnames the controller holds.",
		}, []string{"what"}),
		unavailable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_hostnames_unavailable_addresses", Help: "Addresses that are NotAvailable (collisions and template errors).",
		}),
		unavailCount: map[resource.Key]int{},
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.reconciles, c.writes, c.sizes, c.unavailable)
	}
	return c
}

func watched(k resource.Kind) bool {
	return k == resource.HostnameGenerator || slices.Contains(serviceKinds, k)
}

// Run keeps statuses up to date until ctx ends. Call it only while leading.
func (c *Controller) Run(ctx context.Context) error {
	c.written = reconcile.Inflight[resource.Key, uint64]{} // a new term trusts the store
	q := reconcile.New[resource.Key]()
	defer q.Close()
	cancel := c.o.Cache.Subscribe(func(keys []resource.Key) {
		for _, k := range keys {
			if watched(k.Kind) {
				q.Add(k)
			}
		}
	})
	defer cancel()
	if err := waitSynced(ctx, c.o.Cache); err != nil {
		return nil
	}

	// Start from everything the cache holds: generators first, so that
	// each service is rendered once.
	start := time.Now()
	engine := hostname.NewEngine(c.o.Zone)
	var all []resource.Key
	gens := 0
	c.o.Cache.Scan(cache.Query{Kind: resource.HostnameGenerator}, func(g *resource.Object) {
		c.setGenerator(engine, g)
		gens++
	})
	for _, k := range serviceKinds {
		c.o.Cache.Scan(cache.Query{Kind: k}, func(s *resource.Object) {
			engine.SetService(resource.HostnameServiceOf(s))
			all = append(all, s.Key())
		})
	}
	c.flush(ctx, engine, q, all)
	c.o.Log.Info("hostnames controller started", "generators", gens, "services", len(all), "dur", time.Since(start))

	resync := time.NewTicker(c.o.Resync)
	defer resync.Stop()
	settled := time.NewTimer(time.Second)
	defer settled.Stop()
	notify := c.o.Settled
	next := q.Batches(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-settled.C:
			if notify != nil {
				notify()
				notify = nil
			}
		case <-resync.C:
			c.flush(ctx, engine, q, allServices(c.o.Cache))
		case keys, ok := <-next:
			if !ok {
				return nil
			}
			start := time.Now()
			var touched []resource.Key
			for _, k := range keys {
				if c.apply(engine, k) {
					touched = append(touched, k)
				}
			}
			c.flush(ctx, engine, q, touched)
			c.reconciles.Observe(time.Since(start).Seconds())
			if notify != nil {
				settled.Reset(time.Second)
			}
		}
	}
}

func waitSynced(ctx context.Context, ch *cache.Cache) error {
	for {
		if synced, _ := ch.Status(); synced {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func allServices(ch *cache.Cache) []resource.Key {
	var keys []resource.Key
	for _, k := range serviceKinds {
		keys = append(keys, ch.Keys(cache.Query{Kind: k})...)
	}
	return keys
}

// apply feeds the current state of k to the engine and reports whether k is
// a service whose status must be compared again.
func (c *Controller) apply(engine *hostname.Engine, k resource.Key) bool {
	obj, ok := c.o.Cache.Peek(k) // read only
	if k.Kind == resource.HostnameGenerator {
		if ok {
			c.setGenerator(engine, obj)
		} else {
			engine.DeleteGenerator(k.Name)
		}
		return false
	}
	if !ok {
		engine.DeleteService(resource.HostnameKey(k))
		c.setUnavailable(k, 0)
		c.written.Forget(k)
		return false
	}
	engine.SetService(resource.HostnameServiceOf(obj))
	// A service event may be a status write by someone else (or a conflict
	// retry): compare it even if the engine saw no change.
	return true
}

func (c *Controller) setGenerator(engine *hostname.Engine, obj *resource.Object) {
	g, err := resource.HostnameGeneratorOf(obj)
	if err != nil {
		// Admission checks templates, so this is a generator stored by an
		// older version with other rules: it names nothing.
		c.o.Log.Warn("ignoring a HostnameGenerator that cannot be used", "name", obj.Name, "err", err)
		engine.DeleteGenerator(obj.Name)
		return
	}
	engine.SetGenerator(g)
}

// flush writes the status of every service the engine marked dirty, and of
// extra, where it differs from what is stored.
func (c *Controller) flush(ctx context.Context, engine *hostname.Engine, q *reconcile.Queue[resource.Key], extra []resource.Key) {
	keys := extra
	for _, sk := range engine.TakeDirty() {
		keys = append(keys, resource.Key{Kind: resource.Kind(sk.Kind), Mesh: sk.Mesh, Name: sk.Name})
	}
	slices.SortFunc(keys, compareKeys)
	keys = slices.Compact(keys)

	// Write as the batches fill rather than after the last key: a first
	// pass over 100,000 services would otherwise hold 100,000 copies of
	// them at once, and the heap that peak leaves scattered stays.
	ops := make([]store.Op, 0, min(len(keys), c.o.BatchSize))
	for _, k := range keys {
		if len(ops) == c.o.BatchSize {
			if !c.write(ctx, q, ops) {
				return
			}
			clear(ops)
			ops = ops[:0]
		}
		addrs, ok := engine.Addresses(resource.HostnameKey(k))
		if !ok {
			continue
		}
		obj, ok := c.o.Cache.Peek(k) // read only: cloned before writing
		if !ok {
			continue
		}
		want := toAddresses(obj, addrs)
		c.setUnavailable(k, countUnavailable(want))
		same, sum := c.unchanged(k, obj, want)
		if same {
			continue
		}
		c.written.Put(k, sum)
		obj = obj.Clone()
		st := serviceStatus(obj)
		st.Service().Addresses = want
		obj.Status = st
		ops = append(ops, store.Op{Type: store.OpPatchStatus, Object: obj, Patch: statusPatch, DiscardObject: true})
	}
	if len(ops) > 0 {
		c.write(ctx, q, ops)
	}
	gens, svcs, hosts := engine.Sizes()
	c.sizes.WithLabelValues("generators").Set(float64(gens))
	c.sizes.WithLabelValues("services").Set(float64(svcs))
	c.sizes.WithLabelValues("hostnames").Set(float64(hosts))
}

// unchanged reports whether the store holds want as the addresses of k:
// our last write while its echo is on the way, else what obj, the cache's
// copy, shows. It also returns the digest of want.
func (c *Controller) unchanged(k resource.Key, obj *resource.Object, want []resource.Address) (bool, uint64) {
	sum := c.sum(want)
	if w, ok := c.written.Pending(k, obj.Revision); ok {
		return w == sum, sum
	}
	return slices.Equal(serviceStatus(obj).Service().Addresses, want), sum
}

// sum returns the digest of addresses, as written keeps.
func (c *Controller) sum(addrs []resource.Address) uint64 {
	c.digest.Reset()
	for _, a := range addrs {
		c.digest.String(a.Hostname)
		c.digest.String(a.Status)
		c.digest.String(a.Origin.Kind)
		c.digest.String(a.Origin.Name)
		c.digest.String(a.Reason)
	}
	return c.digest.Sum()
}

// statusPatch is what the hostnames controller owns of a status: the
// addresses. Writing only those, unversioned, keeps it from conflicting
// with the other controllers that write the same statuses.
var statusPatch = &store.StatusPatch{Fields: []string{"addresses"}}

// write commits ops in one transaction. It returns false when writing
// must stop: another instance leads, or ctx ended.
func (c *Controller) write(ctx context.Context, q *reconcile.Queue[resource.Key], ops []store.Op) bool {
	results, err := c.o.Store.Apply(ctx, ops...)
	if err != nil {
		if errors.Is(err, store.ErrFenced) {
			// Another instance leads: our work is being stopped, and the
			// new leader writes these services.
			c.o.Log.Info("no longer the leader: dropping the hostname writes", "services", len(ops))
			return false
		}
		for _, op := range ops {
			c.written.Forget(op.Object.Key())
		}
		if ctx.Err() == nil {
			c.o.Log.Warn("writing hostnames failed; will retry", "services", len(ops), "err", err)
			c.writes.WithLabelValues("error").Add(float64(len(ops)))
			for _, op := range ops {
				q.AddAfter(retryDelay, op.Object.Key())
			}
		}
		return ctx.Err() == nil
	}
	for i, r := range results {
		k := ops[i].Object.Key()
		if r.Err != nil {
			c.written.Forget(k)
		} else {
			c.written.Written(k, r.Revision)
		}
		switch {
		case r.Err == nil:
			c.writes.WithLabelValues("ok").Inc()
		case errors.Is(r.Err, store.ErrNotFound):
			// Deleted meanwhile; the deletion event follows.
		case errors.Is(r.Err, store.ErrConflict):
			// The service changed after the cache copy we wrote over; the
			// newer version is on its way, and the retry compares again.
			c.writes.WithLabelValues("conflict").Inc()
			q.AddAfter(retryDelay, k)
		default:
			c.writes.WithLabelValues("error").Inc()
			c.o.Log.Warn("writing hostnames failed; will retry", "kind", k.Kind, "mesh", k.Mesh, "name", k.Name, "err", r.Err)
			q.AddAfter(retryDelay, k)
		}
	}
	return true
}

func (c *Controller) setUnavailable(k resource.Key, n int) {
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

func compareKeys(a, b resource.Key) int {
	switch {
	case a.Kind != b.Kind:
		return compare(string(a.Kind), string(b.Kind))
	case a.Mesh != b.Mesh:
		return compare(a.Mesh, b.Mesh)
	default:
		return compare(a.Name, b.Name)
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// toAddresses converts the engine's addresses of obj to status.addresses.
func toAddresses(obj *resource.Object, addrs []hostname.Address) []resource.Address {
	if len(addrs) == 0 {
		return nil
	}
	out := make([]resource.Address, len(addrs))
	for i, a := range addrs {
		status := resource.AddressNotAvailable
		if a.Available {
			status = resource.AddressAvailable
		}
		origin := resource.AddressOrigin{Kind: OriginKind, Name: a.Generator}
		if a.Own {
			origin = resource.AddressOrigin{Kind: resource.OriginInternalVIP, Name: obj.Name}
		}
		out[i] = resource.Address{Hostname: a.Hostname, Status: status, Origin: origin, Reason: a.Reason}
	}
	return out
}

// serviceStatus returns obj's status, or a new empty one of its kind.
func serviceStatus(obj *resource.Object) resource.ServiceStatusOf {
	if st, ok := obj.Status.(resource.ServiceStatusOf); ok && st != nil {
		return st
	}
	return resource.MustLookup(obj.Kind).NewStatus().(resource.ServiceStatusOf)
}
