package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// kindOrder is the order of the first view: what selects or groups
// services before the services, so that each is decided once.
var kindOrder = []resource.Kind{
	resource.Mesh, resource.Zone, resource.HostnameGenerator, resource.Dataplane,
	resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService,
}

// term is one run of the cores from a fresh state. Its passes decide
// statuses (term.go), take Create requests (create.go) and hand the
// writes to the store in batches (commit.go).
type term struct {
	r        *Runner
	q        *Queue[resource.Key]
	notified atomic.Int64 // the cache revision whose changes are queued
	written  Inflight[resource.Key, uint64]
	// lastWrite is the revision of the runner's last write in this term.
	lastWrite int64
	digest    Digest
	statuses  int
	batch     []pendingWrite
	// committing is the batch the store is committing while the cores
	// decide the next one; nil when none is.
	committing *commit
	// spare holds the emptied slices of the last batch committed, for
	// the next one.
	spare commit
	// creating holds the resources of Create requests the current pass
	// decides, by key; nil outside such a pass.
	creating map[resource.Key]creation
	// seen holds the revision of each resource the cores observed since
	// the last pass; echoes, the revision of each status write of the
	// runner made over the revision the cores had observed, until the
	// cache reports it (echo).
	seen, echoes map[resource.Key]int64
	echoPeak     int // the most echoes held since echoes was last empty
	// again holds the keys of resources the runner wrote that a pass had
	// to decide before the cache showed them: their echo is not skipped
	// (echo), so that they are decided again over what the cache holds.
	again map[resource.Key]struct{}
	// deferred holds the services a pass did not decide because the cache
	// showed a change of theirs the cores had not observed yet (decide);
	// the next pass, which observes it, decides them.
	deferred []resource.Key
	// uniq is distinct's set, kept empty between passes.
	uniq map[resource.Key]struct{}
}

// see records that the cores observe obj.
func (t *term) see(obj *resource.Object) {
	if t.seen == nil {
		t.seen = map[resource.Key]int64{}
	}
	t.seen[obj.Key()] = obj.Revision
}

// expectEcho records that the change event of k at rev will be the echo
// of the runner's own write.
func (t *term) expectEcho(k resource.Key, rev int64) {
	if t.echoes == nil {
		t.echoes = map[resource.Key]int64{}
	}
	t.echoes[k] = rev
	t.echoPeak = max(t.echoPeak, len(t.echoes))
}

// echo reports whether the change of k the cache reported is the
// runner's own status write and nothing else, which the cores need not
// observe: they decided that status, over the revision they had seen.
// Reading the revision does not decode the resource.
func (t *term) echo(k resource.Key) bool {
	rev, ok := t.echoes[k]
	if !ok {
		return false
	}
	delete(t.echoes, k)
	if len(t.echoes) == 0 {
		// A map keeps its size: let a large one go (a first pass's), and
		// keep a batch's for the next (see Queue.Take).
		if t.echoPeak > keepPending {
			t.echoes = nil
		}
		t.echoPeak = 0
	}
	if _, again := t.again[k]; again {
		delete(t.again, k)
		return false // a decision waits for it (decide): the cores observe it
	}
	cur, ok := t.r.o.Cache.RevisionOf(k)
	if !ok || cur != rev {
		return false
	}
	// The cache shows the write: what was held of it, to compare with
	// until now, goes (the cores are not asked, so Pending would never
	// be, and every service a first pass or Create wrote stayed held).
	t.written.Forget(k)
	return true
}

// term runs the cores from a fresh state until ctx ends or a write fails:
// it follows the cache, makes a first pass over everything, then passes
// over changes, creates, wakes and resyncs.
func (r *Runner) term(ctx context.Context) error {
	t := &term{r: r, q: New[resource.Key]()}
	defer t.q.Close()
	defer r.o.Cache.Subscribe(t.queue)()
	if !r.o.Cache.WaitSynced(ctx) {
		return nil
	}
	// Creates wait for the first pass rather than fall back to two writes:
	// the term takes them once it has started.
	open := make(chan struct{})
	r.open.Store(&open)
	defer func() {
		r.open.Store(nil)
		close(open)
	}()
	if err := t.first(ctx); err != nil {
		return err
	}
	return t.loop(ctx)
}

// queue is the term's cache subscription: it queues the changed keys some
// core watches and records the revision they reach.
func (t *term) queue(keys []resource.Key) {
	r := t.r
	for _, k := range keys {
		if r.watches(k.Kind) {
			t.q.Add(k)
		}
	}
	// Read after the keys are queued: every change up to rev is in
	// the queue or was taken from it.
	rev := r.o.Cache.Revision()
	for cur := t.notified.Load(); rev > cur && !t.notified.CompareAndSwap(cur, rev); cur = t.notified.Load() {
	}
	// The keys woke the runner before rev was recorded: it may have
	// taken them and gone back to sleep, and must look again to
	// report that it settled at rev.
	t.q.Wake()
}

// first starts the cores, shows them everything the cache holds, kind by
// kind in kindOrder, and writes what they decide.
func (t *term) first(ctx context.Context) error {
	r := t.r
	start := time.Now()
	var firstDone func()
	if r.o.FirstPass != nil {
		firstDone = r.o.FirstPass()
	}
	endFirst := func() {
		if firstDone != nil {
			firstDone()
			firstDone = nil
		}
	}
	defer endFirst() // when the first pass fails
	t.notified.Store(r.o.Cache.Revision())
	env := Env{Store: r.o.Store, Cache: r.o.Cache, Now: r.o.Now, Log: r.o.Log}
	for _, c := range r.cores {
		if err := c.Start(ctx, env); err != nil {
			return fmt.Errorf("%s: start: %w", c.Name(), err)
		}
	}
	objects := 0
	for _, k := range kindOrder {
		var watching []Core
		for _, c := range r.cores {
			if c.Watches(k) {
				watching = append(watching, c)
			}
		}
		if len(watching) == 0 {
			continue
		}
		r.o.Cache.Scan(cache.Query{Kind: k}, func(obj *resource.Object) {
			objects++
			t.see(obj)
			for _, c := range watching {
				c.Observe(obj.Key(), obj)
			}
		})
	}
	if err := t.pass(ctx, nil); err != nil {
		return err
	}
	endFirst()
	r.namedOnce.Do(func() { close(r.named) })
	r.passes.WithLabelValues("first").Observe(time.Since(start).Seconds())
	r.o.Log.Info("controllers started", "objects", objects, "dur", time.Since(start))
	return nil
}

// loop passes over what comes until ctx ends: creates first, then queued
// changes, kicks, the cores' wakes and resyncs; it reports each revision
// it settles at.
func (t *term) loop(ctx context.Context) error {
	r := t.r
	resync := time.NewTicker(r.o.Resync)
	defer resync.Stop()
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	settled := int64(-1)
	for {
		// Creates are taken before changes, and between every two passes
		// of changes, so that a busy feed does not hold them back.
		select {
		case req := <-r.creates:
			if err := t.create(ctx, req); err != nil {
				return err
			}
			continue
		default:
		}
		// Read before Take: every change up to rev was queued before rev
		// was recorded, so when Take finds nothing all of them were taken.
		rev := t.notified.Load()
		if keys := t.q.Take(); keys != nil {
			start := time.Now()
			t.observe(keys)
			if err := t.pass(ctx, nil); err != nil {
				return err
			}
			r.passes.WithLabelValues("changes").Observe(time.Since(start).Seconds())
			continue
		}
		if rev >= t.lastWrite && rev != settled && t.q.Scheduled() == 0 {
			settled = rev
			r.unseen.Set(float64(t.written.Len()))
			if r.o.Settled != nil {
				r.o.Settled(rev)
			}
		}
		t.arm(wake)
		if stop, err := t.await(ctx, wake, resync); stop || err != nil {
			return err
		}
	}
}

// await waits for the next thing to do and does it, but for queued
// changes, which loop takes; stop is true when ctx ended.
func (t *term) await(ctx context.Context, wake *time.Timer, resync *time.Ticker) (stop bool, err error) {
	r := t.r
	select {
	case <-ctx.Done():
		return true, nil
	case <-t.q.Ready():
	case req := <-r.creates:
		return false, t.create(ctx, req)
	case <-r.kick:
		return false, t.pass(ctx, nil)
	case <-wake.C:
		return false, t.pass(ctx, nil)
	case <-resync.C:
		start := time.Now()
		if err := t.pass(ctx, t.allServices()); err != nil {
			return false, err
		}
		r.passes.WithLabelValues("resync").Observe(time.Since(start).Seconds())
	}
	return false, nil
}

// observe shows the cores the changes of keys, which the queue gave, but
// the echoes of the runner's own writes.
func (t *term) observe(keys []resource.Key) {
	for _, k := range keys {
		if t.echo(k) {
			continue
		}
		obj, ok := t.r.o.Cache.Peek(k)
		if ok {
			t.see(obj)
		} else {
			obj = nil
		}
		for _, c := range t.r.cores {
			if c.Watches(k.Kind) {
				c.Observe(k, obj)
			}
		}
	}
}

// catchUp shows the cores every change up to revision after before a
// create pass decides (store.Creation.After): creates are taken before
// queued changes, and a zone that stores a HostnameGenerator and, just
// after, the services it names would otherwise see them decided without
// it, and written twice (the generator's hostnames in a second write).
// It waits until the cache has queued the changes up to after.
func (t *term) catchUp(ctx context.Context, after int64) error {
	for t.notified.Load() < after {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.q.Ready():
			// The subscription records the revision it queued before it
			// wakes the queue; a wake taken here leaves nothing pending
			// unseen: the term takes the queue before it sleeps.
		}
	}
	if keys := t.q.Take(); keys != nil {
		t.observe(keys)
	}
	return nil
}

// arm sets timer to the earliest Wake of the cores.
func (t *term) arm(timer *time.Timer) {
	var next time.Time
	for _, c := range t.r.cores {
		if w := c.Wake(); !w.IsZero() && (next.IsZero() || w.Before(next)) {
			next = w
		}
	}
	d := time.Hour
	if !next.IsZero() {
		d = max(next.Sub(t.r.o.Now()), time.Millisecond)
	}
	timer.Reset(d)
}

// allServices returns every service of a kind some core decides parts of.
func (t *term) allServices() []resource.Key {
	var keys []resource.Key
	for _, k := range kindOrder {
		if t.owned(k).empty() {
			continue
		}
		keys = append(keys, t.r.o.Cache.Keys(cache.Query{Kind: k})...)
	}
	return keys
}

type patch store.StatusPatch

func (p patch) empty() bool { return len(p.Fields) == 0 && len(p.Conditions) == 0 }

// owned returns what the cores decide of the status of kind k.
func (t *term) owned(k resource.Kind) patch {
	var p patch
	for _, c := range t.r.cores {
		o := c.Owns(k)
		p.Fields = append(p.Fields, o.Fields...)
		p.Conditions = append(p.Conditions, o.Conditions...)
	}
	return p
}

// pass writes what the cores want now: their other writes, and the status
// of every service some core marked dirty, and of extra.
func (t *term) pass(ctx context.Context, extra []resource.Key) error {
	for _, c := range t.r.cores {
		for _, w := range c.Ops(t.r.o.Now()) {
			t.batch = append(t.batch, pendingWrite{Write: w})
		}
	}
	keys := append(extra, t.deferred...)
	t.deferred = t.deferred[:0]
	for _, c := range t.r.cores {
		keys = append(keys, c.Dirty()...)
	}
	// Decide in key order, so that the same changes give the same writes
	// (the order of address allocation) whatever order they came in.
	keys = t.distinct(keys)
	owned := map[resource.Kind]patch{}
	for _, k := range keys {
		p, ok := owned[k.Kind]
		if !ok {
			p = t.owned(k.Kind)
			owned[k.Kind] = p
		}
		if p.empty() {
			continue
		}
		if err := t.decide(ctx, k, p); err != nil {
			t.wait()
			return err
		}
	}
	if len(t.seen) <= keepPending {
		clear(t.seen) // kept for the next pass (see Queue.Take)
	} else {
		t.seen = nil
	}
	if err := t.flush(ctx); err != nil {
		return err
	}
	return t.wait()
}

// distinct returns keys without duplicates, in key order; it reorders
// keys. A long list is deduplicated before it is sorted: every core marks
// a created service dirty, and sorting a zone's batches of a thousand
// services five times over was 8% of its runner's passes.
func (t *term) distinct(keys []resource.Key) []resource.Key {
	if len(keys) >= 64 {
		if t.uniq == nil {
			t.uniq = map[resource.Key]struct{}{}
		}
		out := keys[:0]
		for _, k := range keys {
			if _, dup := t.uniq[k]; !dup {
				t.uniq[k] = struct{}{}
				out = append(out, k)
			}
		}
		if len(t.uniq) <= keepPending {
			clear(t.uniq)
		} else {
			t.uniq = nil
		}
		keys = out
	}
	slices.SortFunc(keys, compareKeys)
	return slices.Compact(keys)
}

// decide builds the status of service k from every core's part and queues
// its write when it differs from what is stored.
func (t *term) decide(ctx context.Context, k resource.Key, p patch) error {
	cr, creating := t.creating[k]
	obj, ok := cr.obj, creating
	if !creating {
		obj, ok = t.r.o.Cache.Peek(k)
	}
	if !ok {
		if _, mine := t.echoes[k]; mine {
			// Written by this runner (a create of an earlier pass) and not
			// in the cache yet: a MeshMultiZoneService created just before
			// a service it selects. Decided again once the cache shows it,
			// or the service's part of its status would be lost (its
			// echo is otherwise skipped).
			if t.again == nil {
				t.again = map[resource.Key]struct{}{}
			}
			t.again[k] = struct{}{}
		}
		return nil // deleted; the cores heard of it
	}
	if t.unobserved(k, obj, creating) {
		// The cache holds a change of k that the cores have not observed:
		// its event is queued, or about to be. Decided now, the status
		// would carry what one core asked for (the Kubernetes controller
		// hands over a Service's ClusterIPs before it creates the
		// MeshService) without what the others decide of the change, and a
		// second write would follow. The next pass observes the change and
		// decides k. A key the cores observed in this pass is decided now
		// even if it changed again since, so that a busy key is decided.
		t.deferred = append(t.deferred, k)
		return nil
	}
	st := resource.MustLookup(k.Kind).NewStatus()
	var ops []store.Op
	for _, c := range t.r.cores {
		if o := c.Owns(k.Kind); len(o.Fields) > 0 || len(o.Conditions) > 0 {
			ops = append(ops, c.Decide(obj, st)...)
		}
	}
	for _, op := range ops {
		t.batch = append(t.batch, pendingWrite{Write: Write{Op: op}})
	}
	want := t.sum(st)
	if creating {
		return t.queueCreate(ctx, cr, st, p, want)
	}
	same := false
	if w, pending := t.written.Pending(k, obj.Revision); pending {
		same = w == want
	} else if obj.Status != nil {
		same = t.sum(obj.Status) == want
	} else {
		same = t.sum(resource.MustLookup(k.Kind).NewStatus()) == want
	}
	if same {
		if len(ops) > 0 && t.statuses >= t.r.o.BatchSize {
			return t.flush(ctx)
		}
		return nil
	}
	t.written.Put(k, want)
	sp := store.StatusPatch(p)
	op := store.Op{Type: store.OpPatchStatus, Object: &resource.Object{Kind: k.Kind, Mesh: k.Mesh, Name: k.Name, Status: st}, Patch: &sp, DiscardObject: true, Base: obj}
	var base int64
	if seen, ok := t.seen[k]; ok && seen == obj.Revision {
		base = seen
	}
	return t.queueStatus(ctx, pendingWrite{Write: Write{Op: op}, key: k, status: true, base: base}, t.record(obj, st, sp))
}

// unobserved reports whether the cache holds a change of k, obj, that
// the cores have not observed: they did not observe k in this pass, and
// its event is queued or not yet queued (the subscription queues it and
// wakes the runner once it runs).
func (t *term) unobserved(k resource.Key, obj *resource.Object, creating bool) bool {
	if _, observed := t.seen[k]; creating || observed || !t.r.watches(k.Kind) {
		return false
	}
	return obj.Revision > t.notified.Load() || t.q.Has(k)
}

// record returns the history of a status write that replaces the parts
// sp names of old's status with next.
func (t *term) record(old *resource.Object, next resource.Status, sp store.StatusPatch) []store.Op {
	if t.r.o.Record == nil {
		return nil
	}
	return t.r.o.Record(old, next, sp)
}

// sum is the digest of what the cores decide of st.
func (t *term) sum(st resource.Status) uint64 {
	t.digest.Reset()
	for _, c := range t.r.cores {
		c.Sum(&t.digest, st)
	}
	return t.digest.Sum()
}

func compareKeys(a, b resource.Key) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Mesh, b.Mesh); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}
