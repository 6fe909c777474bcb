package reconcile

import (
	"context"
	"errors"
	"log/slog"
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

func (r *Runner) watches(k resource.Kind) bool {
	for _, c := range r.cores {
		if c.Watches(k) {
			return true
		}
	}
	return false
}
