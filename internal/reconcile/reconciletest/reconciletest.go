// Package reconciletest runs cores of controllers in tests: a real
// embedded store, its cache and a reconcile.Runner, with a way to wait
// until the runner has settled after a change instead of sleeping.
//
// Only tests import it.
package reconciletest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/store"
)

// Env is a running runner over a store.
type Env struct {
	t     testing.TB
	Store store.Store
	Cache *cache.Cache
	// Runner is the runner of the current term (Restart makes a new one).
	Runner *Runner
	opts   Options

	mu      sync.Mutex
	settled int64
	wake    chan struct{}
	stop    func()
	stopped chan struct{}
	// Fenced counts the batches the fence refused.
	Fenced atomic.Int64
	// Applies counts the batches the runner wrote.
	Applies atomic.Int64
	// Metrics holds the current runner's metrics.
	Metrics *prometheus.Registry
}

// Runner is reconcile.Runner (an alias so that tests name one package).
type Runner = reconcile.Runner

// Options tune Start.
type Options struct {
	// Cores returns the cores of a new term; Restart calls it again, so
	// that nothing survives a restart but the store.
	Cores func() []reconcile.Core
	// Fence, when set, fences the runner's writes as a leader's are.
	Fence *store.Fence
	// BatchSize is the runner's (its default when 0).
	BatchSize int
	// Now is the runner's clock (time.Now when nil).
	Now func() time.Time
	// Log receives the runner's log (discarded when nil).
	Log *slog.Logger
	// FirstPass is the runner's (reconcile.Options.FirstPass).
	FirstPass func() (done func())
}

// counting counts Apply calls and fenced refusals.
type counting struct {
	store.Store
	e *Env
}

func (s counting) Apply(ctx context.Context, ops ...store.Op) ([]store.Result, error) {
	rs, err := s.Store.Apply(ctx, ops...)
	s.e.Applies.Add(1)
	if errors.Is(err, store.ErrFenced) {
		s.e.Fenced.Add(1)
	}
	return rs, err
}

// Start runs a cache and a runner of o.Cores over st until the test ends.
func Start(t testing.TB, st store.Store, o Options) *Env {
	t.Helper()
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &Env{t: t, Store: st, opts: o, wake: make(chan struct{})}
	e.start()
	t.Cleanup(e.Stop)
	return e
}

func (e *Env) start() {
	e.mu.Lock()
	e.settled = -1
	e.mu.Unlock()
	e.Cache = cache.New(e.Store, e.opts.Log, nil)
	e.Metrics = prometheus.NewRegistry()
	e.Runner = reconcile.NewRunner(reconcile.Options{
		Cache: e.Cache, Store: counting{e.Store, e}, Log: e.opts.Log, Registerer: e.Metrics,
		Now: e.opts.Now, BatchSize: e.opts.BatchSize, Settled: e.onSettled, FirstPass: e.opts.FirstPass,
	}, e.opts.Cores()...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { e.Cache.Run(ctx); done <- struct{}{} }()
	lead := ctx
	if e.opts.Fence != nil {
		lead = store.WithFence(ctx, *e.opts.Fence)
	}
	r := e.Runner
	stopped := make(chan struct{})
	e.stopped = stopped
	go func() { r.Run(lead); close(stopped); done <- struct{}{} }()
	var once sync.Once
	e.stop = func() { once.Do(func() { cancel(); <-done; <-done }) }
}

func (e *Env) onSettled(rev int64) {
	e.mu.Lock()
	e.settled = rev
	close(e.wake)
	e.wake = make(chan struct{})
	e.mu.Unlock()
}

// Stopped is closed when the runner's Run returns (it returns by itself
// when fenced).
func (e *Env) Stopped() <-chan struct{} { return e.stopped }

// Stop stops the runner and the cache.
func (e *Env) Stop() { e.stop() }

// Restart stops the runner and starts a new one, with new cores and a new
// cache, over the same store: what a restart or a new leader does.
func (e *Env) Restart() {
	e.stop()
	e.start()
}

// Settle waits until the runner has processed every change the store
// holds now, its own writes included, and has nothing left to do.
func (e *Env) Settle() {
	e.t.Helper()
	_, rev, err := e.Store.List(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	e.SettleAt(rev)
}

// SettleAt waits until the runner has settled at revision rev or later.
func (e *Env) SettleAt(rev int64) {
	e.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		e.mu.Lock()
		settled, wake := e.settled, e.wake
		e.mu.Unlock()
		if settled >= rev {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			e.t.Fatalf("the runner did not settle at revision %d (last settled at %d)", rev, settled)
		}
	}
}
