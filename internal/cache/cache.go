// Package cache keeps every resource of the store in memory, fed by the
// store's change feed, and serves the reads of the REST API (and, later, of
// the controllers and the DNS table builder) without touching the database.
//
// The cache follows the feed from the revision of its initial List; when the
// feed reports ErrCompacted it lists again. While the store is unreachable it
// keeps serving what it last knew and reports the error through Status.
//
// It imports resource, store and s2dict only. All methods are safe for
// concurrent use; every object it returns is a clone the caller owns.
package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// PageSize is how many events the cache asks the feed for at once.
const PageSize = 1000

type group struct {
	kind resource.Kind
	mesh string
}

// Cache is an in-memory, indexed copy of the store.
type Cache struct {
	st  store.Store
	log *slog.Logger
	// keeper is st when it keeps every resource in memory: the freezer
	// holds its copies rather than encode its own (frozen.go).
	keeper store.Keeper

	// guards catches readers that modify shared objects (race builds).
	guards guards

	mu       sync.RWMutex
	groups   map[group]map[string]entry
	sorted   map[group][]string // names in order; dropped when the group's membership changes
	labels   *labelSets
	hot      int           // entries held decoded, but for listed ones
	maxHot   int           // more hot entries wake the freezer (frozen.go)
	pressure chan struct{} // wakes the freezer; buffered
	revision int64
	synced   bool
	lastErr  error
	advanced chan struct{} // closed and replaced whenever revision advances

	// freezeMu serializes freezes, which reuse candidates.
	freezeMu   sync.Mutex
	candidates []candidate

	subMu sync.Mutex
	subs  map[int]func([]resource.Key)
	subID int

	// now is the clock entries are stamped with (tests replace it).
	now func() time.Time

	objectsGauge *prometheus.GaugeVec
	revGauge     prometheus.Gauge
	relists      prometheus.Counter
	frozenTotal  prometheus.Counter
	decoded      prometheus.Gauge
	frozen       atomic.Uint64 // frozenTotal, for Frozen
}

// New returns a cache over st. It holds nothing until Run has listed the store.
func New(st store.Store, log *slog.Logger, reg prometheus.Registerer) *Cache {
	c := &Cache{
		st:       st,
		log:      log,
		groups:   map[group]map[string]entry{},
		sorted:   map[group][]string{},
		labels:   newLabelSets(),
		maxHot:   MaxDecoded,
		pressure: make(chan struct{}, 1),
		advanced: make(chan struct{}),
		subs:     map[int]func([]resource.Key){},
		now:      time.Now,
		objectsGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_cache_objects", Help: "Resources held in the in-memory cache, by kind.",
		}, []string{"kind"}),
		revGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_cache_revision", Help: "Store revision the in-memory cache reflects.",
		}),
		relists: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshnames_cache_relists_total", Help: "Full relists of the store by the cache (start and compaction).",
		}),
		frozenTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshnames_cache_frozen_total", Help: "Resources the cache turned from decoded values into their stored encoding after they stopped changing.",
		}),
		decoded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_cache_decoded_objects", Help: "Resources the cache held decoded (changed recently, not frozen yet) after its last freeze pass.",
		}),
	}
	c.keeper, _ = st.(store.Keeper)
	if reg != nil {
		reg.MustRegister(c.objectsGauge, c.revGauge, c.relists, c.frozenTotal, c.decoded)
	}
	return c
}

// Run lists the store and then follows its change feed until ctx ends.
func (c *Cache) Run(ctx context.Context) error {
	go c.freezeLoop(ctx)
	backoff := newBackoff()
	for ctx.Err() == nil {
		if err := c.relist(ctx); err != nil {
			c.fail(ctx, err, backoff)
			continue
		}
		break
	}
	backoff.reset()
	for ctx.Err() == nil {
		wake := c.st.Changed()
		evs, err := c.st.Changes(ctx, c.Revision(), PageSize)
		switch {
		case errors.Is(err, store.ErrCompacted):
			c.log.Warn("change feed compacted past the cache's revision; listing again", "revision", c.Revision())
			if err := c.relist(ctx); err != nil {
				c.fail(ctx, err, backoff)
			}
			continue
		case err != nil:
			c.fail(ctx, err, backoff)
			continue
		}
		backoff.reset()
		c.apply(evs)
		if len(evs) == PageSize {
			continue
		}
		select {
		case <-ctx.Done():
		case <-wake:
		}
	}
	return nil
}

func (c *Cache) fail(ctx context.Context, err error, b *backoff) {
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	first := c.lastErr == nil
	c.lastErr = err
	c.mu.Unlock()
	if first {
		c.log.Error("cache cannot read the store; serving the last known state", "err", err)
	}
	b.wait(ctx)
}

func (c *Cache) relist(ctx context.Context) error {
	objs, rev, err := c.st.List(ctx, "")
	if err != nil {
		return err
	}
	c.relists.Inc()
	c.mu.Lock()
	changed := make([]resource.Key, 0, c.count()+len(objs))
	for g, m := range c.groups {
		for name := range m {
			changed = append(changed, resource.Key{Kind: g.kind, Mesh: g.mesh, Name: name})
		}
	}
	c.groups = map[group]map[string]entry{}
	c.guards.reset()
	c.sorted = map[group][]string{}
	c.labels = newLabelSets()
	c.hot = 0
	for _, o := range objs {
		c.put(o, true, nil)
		changed = append(changed, o.Key())
	}
	c.synced = true
	c.lastErr = nil
	c.advance(rev)
	c.updateGauges()
	c.mu.Unlock()
	c.notify(changed)
	return nil
}

func (c *Cache) apply(evs []store.Event) {
	if len(evs) == 0 {
		c.mu.Lock()
		c.lastErr = nil
		c.mu.Unlock()
		return
	}
	changed := make([]resource.Key, len(evs))
	c.mu.Lock()
	for i, ev := range evs {
		switch ev.Type {
		case store.EventPut:
			c.put(ev.Object, false, ev.Encoding)
		case store.EventDelete:
			c.remove(ev.Key)
		}
		changed[i] = ev.Key
	}
	c.lastErr = nil
	c.advance(evs[len(evs)-1].Revision)
	c.updateGauges()
	c.mu.Unlock()
	c.notify(changed)
}

// Subscribe registers fn to be told the keys of the resources that were
// created, changed or deleted, once the cache reflects the change; after a
// relist it is told every key present before or after. Subscribers are
// level-based: they read the current state with Get. fn runs on the
// cache's goroutine and must return quickly (queue the keys). The returned
// function cancels the subscription.
func (c *Cache) Subscribe(fn func(keys []resource.Key)) (cancel func()) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	c.subID++
	id := c.subID
	c.subs[id] = fn
	return func() {
		c.subMu.Lock()
		defer c.subMu.Unlock()
		delete(c.subs, id)
	}
}

func (c *Cache) notify(keys []resource.Key) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	for _, fn := range c.subs {
		fn(keys)
	}
}

// put stores o, which the cache now owns, and its encoding enc (nil when
// not at hand); listed when a list of the store gave it.
func (c *Cache) put(o *resource.Object, listed bool, enc *store.Encoding) {
	g := group{o.Kind, o.Mesh}
	m := c.groups[g]
	if m == nil {
		m = map[string]entry{}
		c.groups[g] = m
	}
	if old, ok := m[o.Name]; ok {
		c.release(old)
	} else {
		delete(c.sorted, g)
	}
	m[o.Name] = entry{hot: o, listed: listed, at: c.now().UnixNano(), enc: enc}
	c.guards.track(o)
	if listed {
		return
	}
	c.hot++
	if c.hot > c.maxHot {
		select {
		case c.pressure <- struct{}{}:
		default: // the freezer is already woken
		}
	}
}

// release lets go of what the entry e, replaced or removed, held.
func (c *Cache) release(e entry) {
	c.guards.check(e.hot, true)
	if e.hot != nil && !e.listed {
		c.hot--
	}
	c.labels.release(e)
}

func (c *Cache) remove(k resource.Key) {
	g := group{k.Kind, k.Mesh}
	old, ok := c.groups[g][k.Name]
	if !ok {
		return
	}
	c.release(old)
	delete(c.groups[g], k.Name)
	if len(c.groups[g]) == 0 {
		delete(c.groups, g)
	}
	delete(c.sorted, g)
}

// count is the number of resources held.
func (c *Cache) count() int {
	n := 0
	for _, m := range c.groups {
		n += len(m)
	}
	return n
}

func (c *Cache) advance(rev int64) {
	if rev <= c.revision {
		return
	}
	c.revision = rev
	close(c.advanced)
	c.advanced = make(chan struct{})
	c.revGauge.Set(float64(rev))
}

func (c *Cache) updateGauges() {
	counts := map[resource.Kind]int{}
	for g, m := range c.groups {
		counts[g.kind] += len(m)
	}
	for _, d := range resource.Descriptors() {
		c.objectsGauge.WithLabelValues(string(d.Kind)).Set(float64(counts[d.Kind]))
	}
}

// Len returns how many resources the cache holds.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.count()
}

// Revision returns the store revision the cache reflects.
func (c *Cache) Revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.revision
}

// Status reports whether the cache has listed the store, and the last error
// reading the store (nil once a read succeeds again).
func (c *Cache) Status() (synced bool, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.synced, c.lastErr
}

// WaitSynced blocks until the cache has listed the store; it returns false
// when ctx ends first. Controllers call it before their first pass.
func (c *Cache) WaitSynced(ctx context.Context) bool {
	for {
		if synced, _ := c.Status(); synced {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WaitFor blocks until the cache reflects revision rev or ctx ends. The API
// calls it after a write so that a client reads its own writes.
func (c *Cache) WaitFor(ctx context.Context, rev int64) error {
	for {
		c.mu.RLock()
		done, ch := c.revision >= rev, c.advanced
		c.mu.RUnlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Get returns a copy of the resource with key k.
func (c *Cache) Get(k resource.Key) (*resource.Object, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.groups[group{k.Kind, k.Mesh}][k.Name]
	if !ok {
		return nil, false
	}
	return e.clone(k), true
}

// Peek returns the resource with key k for reading only: it may be the
// cache's own, which nobody may modify (clone it first). It spares the
// copy of Get to readers that look and mostly leave (a controller
// comparing what it would write with what is stored).
func (c *Cache) Peek(k resource.Key) (*resource.Object, bool) {
	c.mu.RLock()
	e, ok := c.groups[group{k.Kind, k.Mesh}][k.Name]
	c.mu.RUnlock()
	if !ok {
		return nil, false
	}
	c.guards.check(e.hot, false)
	return e.shared(k), true
}

// RevisionOf returns the revision of the resource with key k, without
// decoding it, and whether the cache holds it.
func (c *Cache) RevisionOf(k resource.Key) (int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.groups[group{k.Kind, k.Mesh}][k.Name]
	switch {
	case !ok:
		return 0, false
	case e.hot != nil:
		return e.hot.Revision, true
	}
	return e.coldRevision()
}

// At returns the resource with key k for reading only, as Peek does,
// when the cache holds its revision rev (store.Known).
func (c *Cache) At(k resource.Key, rev int64) (*resource.Object, bool) {
	c.mu.RLock()
	e, ok := c.groups[group{k.Kind, k.Mesh}][k.Name]
	c.mu.RUnlock()
	if !ok {
		return nil, false
	}
	if e.hot != nil {
		if e.hot.Revision != rev {
			return nil, false
		}
	} else if r, ok := e.coldRevision(); !ok || r != rev {
		return nil, false
	}
	c.guards.check(e.hot, false)
	return e.shared(k), true
}

// AppendJSONAt appends to b the document of the resource k, as
// resource.Object.AppendJSON writes it, when the cache holds its revision
// rev (ok false otherwise): written from the store's encoding of its spec
// and status, without copying or encoding the resource again (the answer
// to a write, whose revision the writer knows).
func (c *Cache) AppendJSONAt(b []byte, k resource.Key, rev int64) (_ []byte, ok bool, err error) {
	c.mu.RLock()
	e, ok := c.groups[group{k.Kind, k.Mesh}][k.Name]
	c.mu.RUnlock()
	if !ok {
		return b, false, nil
	}
	if e.hot != nil {
		ok = e.hot.Revision == rev
	} else {
		r, has := e.coldRevision()
		ok = has && r == rev
	}
	if !ok {
		return b, false, nil
	}
	c.guards.check(e.hot, false)
	if b, err = e.appendJSON(b, k); err != nil {
		return nil, false, fmt.Errorf("encode %s: %w", k, err)
	}
	c.guards.check(e.hot, false)
	return b, true, nil
}

// Label returns the value of the label name of the resource with key k,
// and whether the resource has it, without decoding the resource.
func (c *Cache) Label(k resource.Key, name string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.groups[group{k.Kind, k.Mesh}][k.Name]
	if !ok {
		return "", false
	}
	return e.label(k.Name, name)
}

type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 100 * time.Millisecond} }

func (b *backoff) reset() { b.d = 100 * time.Millisecond }

func (b *backoff) wait(ctx context.Context) {
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	b.d = min(b.d*2, 5*time.Second)
}
