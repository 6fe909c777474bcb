package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// A Core is the logic of one controller: deterministic, with no store,
// cache, goroutine or clock of its own. A Runner feeds it the resources
// that change and writes what it decides. Cores embed Base for the
// methods they do not need.
//
// Two kinds of output exist. Status parts: a core owns some fields and
// condition types of the status of some service kinds (Owns); for every
// service some core marks dirty, the runner asks every core that owns part
// of that kind's status to Decide it, and writes one status patch per
// service carrying all of them, only when it differs from what is stored.
// Other writes (Ops): leases, resources a core creates or deletes; these
// are written as the core returns them, with their results handed back.
type Core interface {
	// Name names the core in logs.
	Name() string
	// Watches reports whether the core reads resources of kind k.
	Watches(k resource.Kind) bool
	// Start forgets the previous term's state and loads what the core
	// keeps outside the resources (such as leases) at the start of a term,
	// before the runner Observes every resource it watches.
	Start(ctx context.Context, env Env) error
	// Observe tells the core the current state of a resource it watches;
	// obj is nil when the resource was deleted. obj belongs to the cache:
	// read it, never modify or keep it.
	Observe(k resource.Key, obj *resource.Object)
	// Dirty returns, and forgets, the services whose status parts the core
	// may decide differently since it was last asked.
	Dirty() []resource.Key
	// Owns returns the parts of the status of kind k that the core
	// decides; an empty patch for kinds it does not decide.
	Owns(k resource.Kind) store.StatusPatch
	// Decide sets the parts the core owns in st, a new status of obj's
	// kind holding nothing else, and returns the writes that must commit
	// in the same transaction as the status (such as the lease of an
	// allocated address). obj belongs to the cache: read only.
	Decide(obj *resource.Object, st resource.Status) []store.Op
	// Sum adds the parts the core owns of st, a status of a kind it owns
	// parts of, to d; the runner compares sums to skip equal writes.
	Sum(d *Digest, st resource.Status)
	// Ops returns, and forgets, the writes the core wants that are not
	// part of a status; now is the runner's clock.
	Ops(now time.Time) []Write
	// Wake returns when the core next needs Ops without any change (the
	// end of a quarantine or a grace period); zero for never.
	Wake() time.Time
}

// Write is a write a core asks for outside a status.
type Write struct {
	Op store.Op
	// Done, when set, is called with the result of Op. It is not called
	// when the whole batch failed: the runner then starts a new term, and
	// every core rebuilds its state from the store.
	Done func(store.Result)
}

// Flusher is implemented by cores that add writes to every batch the
// runner writes, after everything else in it (such as the allocation
// cursors of the address pools, which must commit with the allocations).
type Flusher interface {
	BeforeFlush() []store.Op
}

// Env is what a core reads when a term starts.
type Env struct {
	Store store.Store
	Cache *cache.Cache
	Now   func() time.Time
	Log   *slog.Logger
}

// Base implements every optional method of Core as doing nothing; a core
// embeds it and overrides what it needs.
type Base struct{}

func (Base) Start(context.Context, Env) error                    { return nil }
func (Base) Dirty() []resource.Key                               { return nil }
func (Base) Owns(resource.Kind) store.StatusPatch                { return store.StatusPatch{} }
func (Base) Decide(*resource.Object, resource.Status) []store.Op { return nil }
func (Base) Sum(*Digest, resource.Status)                        {}
func (Base) Ops(time.Time) []Write                               { return nil }
func (Base) Wake() time.Time                                     { return time.Time{} }

// Defaults of Options.
const (
	DefaultResync    = 10 * time.Minute
	DefaultBatchSize = 500
	retryDelay       = 200 * time.Millisecond
	maxBackoff       = 10 * time.Second
)

// Options configures a Runner.
type Options struct {
	Cache *cache.Cache
	Store store.Store
	Log   *slog.Logger
	// Registerer receives the runner's metrics; nil for none.
	Registerer prometheus.Registerer
	// Now is the clock (time.Now when nil). Cores get time only from it.
	Now func() time.Time
	// Resync is the period of the safety-net pass that compares the
	// status of every service with what the cores decide.
	Resync time.Duration
	// BatchSize bounds the status writes of one transaction.
	BatchSize int
	// Settled, when set, is called each time the runner has nothing left
	// to do: every change up to revision rev has been processed and every
	// write of the runner is visible in the cache. Tests wait for it
	// instead of sleeping.
	Settled func(rev int64)
	// Record, when set, returns writes to commit with a status patch that
	// replaces the owned parts of old's status with next (the history of
	// names and addresses); each depends on the patch (store.Op.DependsOn).
	Record func(old *resource.Object, next resource.Status, patch store.StatusPatch) []store.Op
	// FirstPass, when set, is called as a term's first pass starts; the
	// function it returns, when it ends (the server collects garbage
	// less eagerly meanwhile).
	FirstPass func() (done func())
}

// Runner runs cores while its instance leads: it waits for the cache,
// gives each core a first view of everything, then feeds them the changes
// the cache reports, and writes what they decide in batches, one status
// patch per service carrying every core's part, only where it differs from
// what is stored. A write refused because another instance leads stops
// it; a batch that fails for another reason starts a new term after a
// backoff, in which every core rebuilds its state.
type Runner struct {
	o     Options
	cores []Core

	passes *prometheus.HistogramVec
	writes *prometheus.CounterVec
	unseen prometheus.Gauge
	kick   chan struct{}
	// creates takes the requests of Create to the running term; open is
	// that term's channel closed when it ends, nil between terms.
	creates chan *createReq
	open    atomic.Pointer[chan struct{}]
	// named is closed once a term has written its first pass.
	named     chan struct{}
	namedOnce sync.Once
}

// createReq is a call of Create, answered by the term that takes it.
type createReq struct {
	creates []store.Creation
	results []store.Result
	err     error
	// fenced says another instance leads: the term stopped before
	// writing them, and the caller writes them itself.
	fenced bool
	done   chan struct{}
}

// NewRunner returns a runner of cores; it does no I/O.
func NewRunner(o Options, cores ...Core) *Runner {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	r := &Runner{
		o: o, cores: cores, kick: make(chan struct{}, 1), creates: make(chan *createReq), named: make(chan struct{}),
		passes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "meshnames_controllers_pass_duration_seconds", Help: "Time to process one batch of changes, writes included, by kind of pass (first, changes, create, resync).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"pass"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_controllers_writes_total", Help: "Writes of the controllers by what they write (status, other) and result (ok, error).",
		}, []string{"what", "result"}),
		unseen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_controllers_writes_unseen", Help: "Writes of the controllers the cache did not show yet when they last settled (each held until it does).",
		}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(r.passes, r.writes, r.unseen)
	}
	return r
}

// Kick makes the runner ask its cores for Ops now (a test that moved its
// clock past a core's Wake).
func (r *Runner) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Named is closed once a term of r has written its first pass: every
// resource stored when it started was decided and its status written. A
// zone sends the global its services after it, so that they travel once,
// with their names, instead of once bare and again named.
func (r *Runner) Named() <-chan struct{} { return r.named }

// Decides reports whether the cores decide parts of the status of kind
// k, which Create takes.
func (r *Runner) Decides(k resource.Kind) bool {
	for _, c := range r.cores {
		if !patch(c.Owns(k)).empty() {
			return true
		}
	}
	return false
}

// Create stores new resources together with the status the cores decide
// for them: one write each, where a writer's create followed by the
// runner's status write would be two (two commits, two change events, two
// updates of every cache and DNS table, and a window in which the
// resource shows no names). The resources must be admitted and of kinds
// the cores decide (Decides); Create takes them (it sets their status).
// Each one's With ops are written in the same transaction, after it and
// only if it is created.
//
// The running term takes them in its next pass, as if the cache had
// reported them: the cores observe them, decide them with everything else
// that pass decides, and the runner writes each as an OpCreate carrying its
// status. results[i] is the store's result for creates[i]: ErrAlreadyExists
// when the key is taken, as of a plain create. ok is false, and nothing is
// written, when no term runs (this instance does not lead, or the runner is
// between terms, or its term found another instance leading as it wrote
// them): the caller writes the resources itself. err is a failed batch
// (nothing of it written) or ctx's end.
func (r *Runner) Create(ctx context.Context, creates []store.Creation) (results []store.Result, ok bool, err error) {
	open := r.open.Load()
	if open == nil {
		return nil, false, nil
	}
	req := &createReq{creates: creates, done: make(chan struct{})}
	select {
	case r.creates <- req:
	case <-*open:
		return nil, false, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	<-req.done // a term answers every request it takes
	if req.fenced {
		return nil, false, nil
	}
	return req.results, true, req.err
}

var errFenced = errors.New("fenced")

// Run runs the cores until ctx ends or another instance leads. Call it
// only while leading.
func (r *Runner) Run(ctx context.Context) error {
	backoff := retryDelay
	for ctx.Err() == nil {
		err := r.term(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errFenced):
			r.o.Log.Info("no longer the leader: controllers stop")
			return nil
		}
		r.o.Log.Warn("controllers failed to write; starting again from the store", "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
	return nil
}

// kindOrder is the order of the first view: what selects or groups
// services before the services, so that each is decided once.
var kindOrder = []resource.Kind{
	resource.Mesh, resource.Zone, resource.HostnameGenerator, resource.Dataplane,
	resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService,
}

// term is one run of the cores from a fresh state.
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
	// uniq is distinct's set, kept empty between passes.
	uniq map[resource.Key]struct{}
}

// creation is one resource of a Create request.
type creation struct {
	obj  *resource.Object
	with []store.Op
	req  *createReq
	i    int // obj's index in req
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

// commit is a batch handed to the store.
type commit struct {
	batch   []pendingWrite
	ops     []store.Op // of batch, as handed to the store
	results []store.Result
	err     error
	done    chan struct{}
}

type pendingWrite struct {
	Write
	key    resource.Key // of a status patch or a create
	status bool
	// created is a resource of a Create request, written with its status.
	created bool
	// base is the revision of the resource the cores observed and
	// decided the status patch over; 0 when they may not have observed
	// the revision the cache holds.
	base int64
}

func (r *Runner) watches(k resource.Kind) bool {
	for _, c := range r.cores {
		if c.Watches(k) {
			return true
		}
	}
	return false
}

func (r *Runner) term(ctx context.Context) error {
	t := &term{r: r, q: New[resource.Key]()}
	defer t.q.Close()
	cancel := r.o.Cache.Subscribe(func(keys []resource.Key) {
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
	})
	defer cancel()
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
		select {
		case <-ctx.Done():
			return nil
		case <-t.q.Ready():
		case req := <-r.creates:
			if err := t.create(ctx, req); err != nil {
				return err
			}
		case <-r.kick:
			if err := t.pass(ctx, nil); err != nil {
				return err
			}
		case <-wake.C:
			if err := t.pass(ctx, nil); err != nil {
				return err
			}
		case <-resync.C:
			start := time.Now()
			if err := t.pass(ctx, t.allServices()); err != nil {
				return err
			}
			r.passes.WithLabelValues("resync").Observe(time.Since(start).Seconds())
		}
	}
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

// create decides and writes the resources of req and of the other
// requests waiting, and answers them all, whatever happens.
func (t *term) create(ctx context.Context, req *createReq) error {
	reqs := []*createReq{req}
	n := len(req.creates)
	for n < t.r.o.BatchSize {
		select {
		case more := <-t.r.creates:
			reqs = append(reqs, more)
			n += len(more.creates)
			continue
		default:
		}
		break
	}
	var after int64
	for _, req := range reqs {
		for _, cr := range req.creates {
			after = max(after, cr.After)
		}
	}
	if after > 0 {
		if err := t.catchUp(ctx, after); err != nil {
			for _, req := range reqs {
				req.err = err
				close(req.done)
			}
			return err
		}
	}
	start := time.Now()
	now := t.r.o.Now()
	t.creating = make(map[resource.Key]creation, n)
	var keys []resource.Key
	for _, req := range reqs {
		req.results = make([]store.Result, len(req.creates))
		for i, cr := range req.creates {
			obj := cr.Object
			k := obj.Key()
			_, stored := t.r.o.Cache.RevisionOf(k)
			_, twice := t.creating[k]
			switch {
			case t.owned(k.Kind).empty():
				req.results[i].Err = fmt.Errorf("%s: the controllers decide no status of kind %s", k, k.Kind)
				continue
			case stored || twice:
				req.results[i].Err = fmt.Errorf("%s: %w", k, store.ErrAlreadyExists)
				continue
			}
			// As the store will hold it: the cores compare creation times
			// (the oldest service keeps a contested name).
			obj.Status, obj.Revision, obj.Version = nil, 0, 1
			obj.CreationTime = time.Unix(0, now.UnixNano()).UTC()
			t.creating[k] = creation{obj: obj, with: cr.With, req: req, i: i}
			keys = append(keys, k)
			for _, c := range t.r.cores {
				if c.Watches(k.Kind) {
					c.Observe(k, obj)
				}
			}
		}
	}
	err := t.pass(ctx, keys)
	t.creating = nil
	for _, req := range reqs {
		req.err, req.fenced = err, errors.Is(err, errFenced)
		close(req.done)
	}
	t.r.passes.WithLabelValues("create").Observe(time.Since(start).Seconds())
	return err
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
	keys := extra
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

// record returns the history of a status write that replaces the parts
// sp names of old's status with next.
func (t *term) record(old *resource.Object, next resource.Status, sp store.StatusPatch) []store.Op {
	if t.r.o.Record == nil {
		return nil
	}
	return t.r.o.Record(old, next, sp)
}

// queueStatus queues w, a write of a status, and the history ops written
// with it, only with it; it flushes a full batch.
func (t *term) queueStatus(ctx context.Context, w pendingWrite, history []store.Op) error {
	at := len(t.batch)
	t.batch = append(t.batch, w)
	for _, op := range history {
		op.DependsOn = []int{at}
		t.batch = append(t.batch, pendingWrite{Write: Write{Op: op}})
	}
	t.statuses++
	if t.statuses >= t.r.o.BatchSize {
		return t.flush(ctx)
	}
	return nil
}

// queueCreate queues the create of cr's resource with the status st the
// cores decided for it (want is its sum), and the history of its names.
func (t *term) queueCreate(ctx context.Context, cr creation, st resource.Status, p patch, want uint64) error {
	obj := cr.obj
	k := obj.Key()
	t.written.Put(k, want)
	with := append(t.record(obj, st, store.StatusPatch(p)), cr.with...) // obj has no status yet
	obj.Status = st
	done := func(res store.Result) { cr.req.results[cr.i] = res }
	op := store.Op{Type: store.OpCreate, Object: obj, Handed: true, DiscardObject: true, Created: obj.CreationTime}
	return t.queueStatus(ctx, pendingWrite{Write: Write{Op: op, Done: done}, key: k, created: true}, with)
}

// sum is the digest of what the cores decide of st.
func (t *term) sum(st resource.Status) uint64 {
	t.digest.Reset()
	for _, c := range t.r.cores {
		c.Sum(&t.digest, st)
	}
	return t.digest.Sum()
}

// flush hands the queued writes to the store as one transaction, once
// the batch before them is committed, and returns without waiting for
// this one: the cores decide the next batch while the store commits
// (wait waits). A pass ends with wait, so that nothing is in flight
// between passes.
func (t *term) flush(ctx context.Context) error {
	batch := t.batch
	if len(batch) == 0 {
		return nil
	}
	t.statuses = 0
	for _, c := range t.r.cores {
		if f, ok := c.(Flusher); ok {
			for _, op := range f.BeforeFlush() {
				batch = append(batch, pendingWrite{Write: Write{Op: op}})
			}
		}
	}
	err := t.wait()
	// The next batch takes the slices of the one the store committed
	// (wait gave them back); the first is the size of this one (a first
	// pass writes hundreds): one allocation rather than a chain of
	// doublings of a large struct, and none per batch after it.
	t.batch = t.spare.batch
	if t.batch == nil {
		t.batch = make([]pendingWrite, 0, len(batch))
	}
	ops := t.spare.ops[:0]
	t.spare = commit{}
	if err != nil {
		return err
	}
	for _, w := range batch {
		ops = append(ops, w.Op)
	}
	c := &commit{batch: batch, ops: ops, done: make(chan struct{})}
	t.committing = c
	go func() {
		defer close(c.done)
		c.results, c.err = t.r.o.Store.Apply(ctx, ops...)
	}()
	return nil
}

// wait waits for the batch the store is committing, if any, and takes
// in its results.
func (t *term) wait() error {
	c := t.committing
	if c == nil {
		return nil
	}
	t.committing = nil
	<-c.done
	if c.err != nil {
		if errors.Is(c.err, store.ErrFenced) {
			return errFenced
		}
		t.r.writes.WithLabelValues("batch", "error").Inc()
		return c.err
	}
	for i, w := range c.batch {
		res := c.results[i]
		what := "other"
		switch {
		case w.status:
			what = "status"
		case w.created:
			what = "create"
		}
		switch {
		case res.Err == nil:
			t.r.writes.WithLabelValues(what, "ok").Inc()
			t.lastWrite = max(t.lastWrite, res.Revision)
			if w.created {
				// The cores decided its status over exactly what the store
				// now holds: its change event is an echo.
				t.written.Written(w.key, res.Revision)
				t.expectEcho(w.key, res.Revision)
			}
			if w.status {
				t.written.Written(w.key, res.Revision)
				if w.base != 0 && res.Previous == w.base {
					t.expectEcho(w.key, res.Revision)
				}
			}
		case w.created:
			// Not created (the key was taken meanwhile): the cores observed
			// a resource the store does not hold; show them what it does.
			t.written.Forget(w.key)
			t.q.Add(w.key)
			if !errors.Is(res.Err, store.ErrAlreadyExists) {
				t.r.writes.WithLabelValues(what, "error").Inc()
			}
		case w.status && errors.Is(res.Err, store.ErrNotFound):
			// Deleted meanwhile; the deletion event follows.
			t.written.Forget(w.key)
		case w.status:
			t.r.writes.WithLabelValues(what, "error").Inc()
			t.written.Forget(w.key)
			t.r.o.Log.Warn("writing a status failed; will retry", "kind", w.key.Kind, "mesh", w.key.Mesh, "name", w.key.Name, "err", res.Err)
			t.q.AddAfter(retryDelay, w.key)
		default:
			if !errors.Is(res.Err, store.ErrNotFound) && !errors.Is(res.Err, store.ErrConflict) && !errors.Is(res.Err, store.ErrAlreadyExists) && !errors.Is(res.Err, store.ErrDependencyFailed) {
				t.r.writes.WithLabelValues(what, "error").Inc()
			}
		}
		if w.Done != nil {
			w.Done(res)
		}
	}
	t.recycle(c)
	return nil
}

// recycle keeps the slices of the committed batch c, emptied, for the
// next batch: the store holds none of them once Apply returned.
func (t *term) recycle(c *commit) {
	clear(c.batch)
	clear(c.ops)
	t.spare.batch, t.spare.ops = c.batch[:0], c.ops[:0]
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
