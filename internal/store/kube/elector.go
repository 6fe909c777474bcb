package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/store"
)

// Election is one instance's part in electing the holder of a fenced lease
// (store.Fence) among the instances on one cluster: the Lease object of the
// store lease in the system namespace (for the lease "leader",
// meshnames-leader, which shows the holder and term in its own fields).
// It implements leader.Campaign; leader.Lease runs the election with it.
//
// Kubernetes has no session that ends when a process dies, so the others
// take the lease over when it was released, or when its resourceVersion
// has not changed for a lease duration as they see it on their own
// monotonic clocks, as client-go's leader election does: no two clocks are
// compared. Each takeover raises the term by one and is a write conditional
// on the resourceVersion read, so two instances cannot take one term.
// Renewals and the fence checks of the holder's writes (checkFence) both
// rewrite the Lease; within one process they take turns (the lease's
// gate), so they do not conflict with each other.
//
// An Election is used by one goroutine at a time.
type Election struct {
	s      *Store
	name   string
	holder string
	// observed is the lease's resourceVersion as last seen, and when it
	// was first seen (monotonic clock).
	observedRV string
	observedAt time.Time
}

// Election returns this instance's part in the election of the lease
// name, as holder (unique among the instances). It does no I/O.
func (s *Store) Election(name, holder string) *Election {
	return &Election{s: s, name: name, holder: holder}
}

// Holder returns the holder identity of this instance.
func (e *Election) Holder() string { return e.holder }

// Acquire takes the lease for d when there is none, when it was released,
// or when it stood still for its holder's lease duration.
func (e *Election) Acquire(ctx context.Context, d time.Duration) (taken, previous store.Fence, err error) {
	s := e.s
	var o leaseObject
	err = s.c.Get(ctx, kubeapi.Leases, s.o.SystemNamespace, leaseObjectName(e.name), &o)
	if errors.Is(err, kubeapi.ErrNotFound) {
		next := store.Fence{Lease: e.name, Holder: e.holder, Term: 1}
		body := s.leaseBody(store.Lease{Name: e.name, Value: next.LeaseValue(), ExpiresAt: time.Now().Add(d)})
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
	cur, _ := store.ParseFence(l) // unreadable: term 0, taken below
	cur.Lease = e.name
	now := time.Now()
	if o.Metadata.ResourceVersion != e.observedRV {
		e.observedRV, e.observedAt = o.Metadata.ResourceVersion, now
	}
	duration := d
	if ds := o.Spec.LeaseDurationSeconds; ds != nil && *ds > 0 {
		duration = time.Duration(*ds) * time.Second // the holder's own
	}
	released := cur.Holder == ""
	silent := now.Sub(e.observedAt) >= duration
	if !released && !silent && cur.Holder != e.holder {
		return store.Fence{}, cur, nil
	}
	next := store.Fence{Lease: e.name, Holder: e.holder, Term: cur.Term + 1}
	body := s.leaseBody(store.Lease{Name: e.name, Value: next.LeaseValue(), ExpiresAt: time.Now().Add(d)})
	body.Spec.AcquireTime = body.Spec.RenewTime
	body.Metadata.ResourceVersion = o.Metadata.ResourceVersion
	g := s.leases.gate(e.name)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last = proof{}
	var out leaseObject
	err = s.c.Update(ctx, kubeapi.Leases, s.o.SystemNamespace, leaseObjectName(e.name), "", body, &out)
	switch {
	case errors.Is(err, kubeapi.ErrConflict):
		return store.Fence{}, cur, nil // another instance took it first
	case err != nil:
		return store.Fence{}, store.Fence{}, err
	}
	e.cache(&out)
	if released {
		cur = store.Fence{}
	}
	return next, cur, nil
}

func (e *Election) cache(o *leaseObject) {
	if _, c, err := readLease(o); err == nil {
		e.s.leases.set(e.name, c)
	}
}

// Renew extends the lease of f to d from now; false when it is no longer
// f's.
func (e *Election) Renew(ctx context.Context, f store.Fence, d time.Duration) (bool, error) {
	return e.write(ctx, f, f, time.Now().Add(d))
}

// Watch returns when ctx ends: Kubernetes has no session that ends with
// the holder; the others go by the Lease standing still.
func (e *Election) Watch(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Release hands the lease back (no holder, expired now) if it is still
// f's, so that another instance need not wait.
func (e *Election) Release(ctx context.Context, f store.Fence) error {
	ok, err := e.write(ctx, f, store.Fence{Lease: e.name, Term: f.Term}, time.Now())
	if err == nil && !ok {
		err = fmt.Errorf("the lease is no longer %s's", f.Holder)
	}
	return err
}

// Close forgets what the election observed.
func (e *Election) Close() { e.observedRV, e.observedAt = "", time.Time{} }

// write rewrites the lease held by fence with the value of next and the
// expiry until, conditionally on the resourceVersion last seen, reading it
// again after a conflict. It reports false when fence no longer holds the
// lease.
func (e *Election) write(ctx context.Context, fence, next store.Fence, until time.Time) (bool, error) {
	s := e.s
	g := s.leases.gate(e.name)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last = proof{} // the value or expiry changes
	want := string(fence.LeaseValue())
	for attempt := 0; attempt < 5; attempt++ {
		c, ok := s.leases.get(e.name)
		if !ok || attempt > 0 {
			var err error
			if c, ok, err = s.getLease(ctx, e.name); err != nil {
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
		body := s.leaseBody(store.Lease{Name: e.name, Value: next.LeaseValue(), ExpiresAt: until})
		body.Metadata.ResourceVersion = c.rv
		var out leaseObject
		err := s.c.Update(ctx, kubeapi.Leases, s.o.SystemNamespace, leaseObjectName(e.name), "", body, &out)
		switch {
		case err == nil:
			e.cache(&out)
			return true, nil
		case errors.Is(err, kubeapi.ErrConflict):
			continue // a takeover, or another process's write: look again
		default:
			return false, err
		}
	}
	return false, errors.New("the lease keeps changing")
}
