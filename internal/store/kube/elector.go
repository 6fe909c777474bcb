package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/store"
)

// ElectorOptions configures an Elector.
type ElectorOptions struct {
	// Holder identifies this instance; unique among the instances.
	Holder string
	Log    *slog.Logger
	// LeaseDuration is how long the lease stays valid after each renewal,
	// and how long the others watch it stand still before one takes over.
	LeaseDuration time.Duration
	// RenewInterval is how often the leader renews; RetryInterval how
	// often the others look at the lease.
	RenewInterval, RetryInterval time.Duration
	Registerer                   prometheus.Registerer
}

// Elector elects one leader among the instances on one cluster with the
// Lease object meshnames-leader in the system namespace, which holds the
// store lease "leader" (holder and term, an expiry by the holder's clock)
// and shows the holder and term in its own fields.
//
// The others take the lease over when it was released, or when its
// resourceVersion has not changed for a lease duration by their own
// monotonic clock, which is how client-go's leader election avoids
// comparing clocks; each takeover raises the term by one and is a
// conditional write, so two instances cannot both take one term. The
// leader renews every RenewInterval, conditionally; fenced writes rewrite
// the lease too (store.go). A leader that cannot renew stops its work when
// a fifth of the lease duration is left, and releases the lease when its
// context ends, so that another takes over at its next look.
//
// It satisfies leader.Elector.
type Elector struct {
	s      *Store
	o      ElectorOptions
	margin time.Duration

	mu      sync.Mutex
	leading bool
	// observed is the lease's resourceVersion as last seen, and when it
	// was first seen (monotonic clock).
	observedRV string
	observedAt time.Time

	isLeader prometheus.Gauge
	term     prometheus.Gauge
	changes  *prometheus.CounterVec
}

// NewElector returns an elector on the store's cluster; it does no I/O.
func (s *Store) NewElector(o ElectorOptions) *Elector {
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewInterval <= 0 {
		o.RenewInterval = 5 * time.Second
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	e := &Elector{
		s: s, o: o, margin: o.LeaseDuration / 5,
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_leader_is_leader", Help: "1 while this instance leads and runs the controllers, else 0.",
		}),
		term: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_leader_term", Help: "The term of the leader lease this instance last held or saw.",
		}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_leader_changes_total",
			Help: "Changes of this instance's leadership: acquired, released (shutdown), lost (another instance holds the lease) or expired (renewals failed until the safety margin).",
		}, []string{"change"}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(e.isLeader, e.term, e.changes)
	}
	return e
}

// Self returns this instance's holder identity.
func (e *Elector) Self() string { return e.o.Holder }

// Leading reports whether this instance leads.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading
}

func (e *Elector) setLeading(v bool, term int64) {
	e.mu.Lock()
	e.leading = v
	e.mu.Unlock()
	e.isLeader.Set(map[bool]float64{false: 0, true: 1}[v])
	e.term.Set(float64(term))
}

// Run calls lead each time this instance becomes the leader.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	lastHolder := ""
	for ctx.Err() == nil {
		start := time.Now()
		fence, cur, err := e.acquire(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			e.o.Log.Warn("leader election: cannot reach the Kubernetes API; will retry", "err", err)
		case err == nil && fence.Term != 0:
			e.hold(ctx, fence, start, lead)
			lastHolder = ""
		case err == nil && cur.Holder != lastHolder:
			e.o.Log.Info("leader election: another instance leads", "holder", cur.Holder, "term", cur.Term)
			e.term.Set(float64(cur.Term))
			lastHolder = cur.Holder
		}
		select {
		case <-ctx.Done():
		case <-time.After(e.o.RetryInterval):
		}
	}
	return nil
}

// acquire tries to take the lease. It returns the fence of the term it
// took, or a zero fence and the current holder's.
func (e *Elector) acquire(ctx context.Context) (store.Fence, store.Fence, error) {
	ctx, cancel := context.WithTimeout(ctx, e.o.LeaseDuration)
	defer cancel()
	s := e.s
	var o leaseObject
	err := s.c.Get(ctx, kubeapi.Leases, s.o.SystemNamespace, LeaderObject, &o)
	if errors.Is(err, kubeapi.ErrNotFound) {
		next := store.Fence{Lease: LeaderLease, Holder: e.o.Holder, Term: 1}
		body := s.leaseBody(store.Lease{Name: LeaderLease, Value: next.LeaseValue(), ExpiresAt: time.Now().Add(e.o.LeaseDuration)})
		body.Spec.AcquireTime = body.Spec.RenewTime
		var out leaseObject
		err := s.c.Create(ctx, kubeapi.Leases, s.o.SystemNamespace, body, &out)
		switch {
		case errors.Is(err, kubeapi.ErrAlreadyExists):
			return store.Fence{}, store.Fence{}, nil // another instance was first
		case err != nil:
			return store.Fence{}, store.Fence{}, err
		}
		e.cache(&out)
		return next, store.Fence{}, nil
	}
	if err != nil {
		return store.Fence{}, store.Fence{}, err
	}
	l, _, err := readLease(&o)
	if err != nil {
		return store.Fence{}, store.Fence{}, err
	}
	cur, _ := store.ParseFence(l) // unreadable: term 0, taken at once below
	now := time.Now()
	if o.Metadata.ResourceVersion != e.observedRV {
		e.observedRV, e.observedAt = o.Metadata.ResourceVersion, now
	}
	duration := e.o.LeaseDuration
	if d := o.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		duration = time.Duration(*d) * time.Second // the holder's own
	}
	released := cur.Holder == ""
	silent := now.Sub(e.observedAt) >= duration
	if !released && !silent && cur.Holder != e.o.Holder {
		return store.Fence{}, cur, nil
	}
	next := store.Fence{Lease: LeaderLease, Holder: e.o.Holder, Term: cur.Term + 1}
	body := s.leaseBody(store.Lease{Name: LeaderLease, Value: next.LeaseValue(), ExpiresAt: time.Now().Add(e.o.LeaseDuration)})
	body.Spec.AcquireTime = body.Spec.RenewTime
	body.Metadata.ResourceVersion = o.Metadata.ResourceVersion
	var out leaseObject
	err = s.c.Update(ctx, kubeapi.Leases, s.o.SystemNamespace, LeaderObject, "", body, &out)
	switch {
	case errors.Is(err, kubeapi.ErrConflict):
		return store.Fence{}, cur, nil // another instance took it first
	case err != nil:
		return store.Fence{}, store.Fence{}, err
	}
	e.cache(&out)
	return next, store.Fence{}, nil
}

func (e *Elector) cache(o *leaseObject) {
	if _, c, err := readLease(o); err == nil {
		e.s.leases.set(LeaderLease, c)
	}
}

// hold runs lead while the lease is renewed; see Elector.
func (e *Elector) hold(ctx context.Context, fence store.Fence, acquired time.Time, lead func(ctx context.Context)) {
	e.o.Log.Info("leader election: this instance leads", "term", fence.Term)
	e.changes.WithLabelValues("acquired").Inc()
	e.setLeading(true, fence.Term)
	lctx, stop := context.WithCancel(store.WithFence(ctx, fence))
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx)
	}()
	stepDown := func(change string) {
		stop()
		<-done
		e.setLeading(false, fence.Term)
		e.changes.WithLabelValues(change).Inc()
	}
	stopBy := acquired.Add(e.o.LeaseDuration - e.margin)
	deadline := time.NewTimer(time.Until(stopBy))
	defer deadline.Stop()
	renew := time.NewTimer(time.Until(acquired.Add(e.o.RenewInterval)))
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			stepDown("released")
			e.release(fence)
			return
		case <-done:
			e.o.Log.Warn("leader election: the leader's work ended; releasing the lease")
			stepDown("released")
			e.release(fence)
			return
		case <-deadline.C:
			e.o.Log.Error("leader election: could not renew the lease in time; stopping the controllers before it expires", "term", fence.Term)
			stepDown("expired")
			return
		case <-renew.C:
			start := time.Now()
			held, err := e.write(ctx, fence, fence, start.Add(e.o.LeaseDuration), stopBy)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					continue
				}
				e.o.Log.Warn("leader election: renewing the lease failed; will retry", "term", fence.Term, "err", err)
				renew.Reset(e.o.RetryInterval)
			case !held:
				e.o.Log.Error("leader election: the lease was lost; stopping the controllers", "term", fence.Term)
				stepDown("lost")
				return
			default:
				stopBy = start.Add(e.o.LeaseDuration - e.margin)
				deadline.Reset(time.Until(stopBy))
				renew.Reset(time.Until(start.Add(e.o.RenewInterval)))
			}
		}
	}
}

// write rewrites the lease held by fence with the value of next and the
// expiry until, conditionally on the resourceVersion last seen, reading
// it again after a conflict. It reports false when fence no longer holds
// the lease. It gives up at by.
func (e *Elector) write(ctx context.Context, fence, next store.Fence, until, by time.Time) (bool, error) {
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	s := e.s
	g := s.leases.gate(LeaderLease)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last = proof{} // the value or expiry changes
	want := string(fence.LeaseValue())
	for attempt := 0; attempt < 5; attempt++ {
		c, ok := s.leases.get(LeaderLease)
		if !ok || attempt > 0 {
			var err error
			if c, ok, err = s.getLease(ctx, LeaderLease); err != nil {
				return false, err
			}
			if !ok {
				return false, nil
			}
		}
		if string(c.value) != want {
			if attempt == 0 {
				continue
			}
			return false, nil
		}
		body := s.leaseBody(store.Lease{Name: LeaderLease, Value: next.LeaseValue(), ExpiresAt: until})
		body.Metadata.ResourceVersion = c.rv
		var out leaseObject
		err := s.c.Update(ctx, kubeapi.Leases, s.o.SystemNamespace, LeaderObject, "", body, &out)
		switch {
		case err == nil:
			e.cache(&out)
			return true, nil
		case errors.Is(err, kubeapi.ErrConflict):
			continue // our own fenced writes, or a takeover: look again
		default:
			return false, err
		}
	}
	return false, fmt.Errorf("the lease keeps changing")
}

// release hands the lease back (no holder, expired now), if it is still
// ours, so that another instance need not wait. Best effort.
func (e *Elector) release(fence store.Fence) {
	ctx, cancel := context.WithTimeout(context.Background(), min(e.o.RetryInterval, 2*time.Second))
	defer cancel()
	next := store.Fence{Lease: LeaderLease, Term: fence.Term}
	ok, err := e.write(ctx, fence, next, time.Now(), time.Now().Add(2*time.Second))
	if err != nil || !ok {
		e.o.Log.Warn("leader election: could not release the lease; it expires on its own", "err", err)
		return
	}
	e.o.Log.Info("leader election: released the lease", "term", fence.Term)
}
