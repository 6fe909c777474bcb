// Package reconcile holds what every controller shares: the Runner, which
// hosts the pure cores of the controllers (the hostname engine, the VIP
// planner, the Dataplane planner, the overlap index, the
// MeshMultiZoneService matcher) and does everything else once - waiting
// for the cache, the first pass, event-driven work, the safety-net resync,
// one batched status write per service carrying every core's part, echo
// skipping, stopping when fenced, backoff - and the parts it is built of: a
// set of pending keys that deduplicates bursts (Queue), the bookkeeping of
// writes whose echo has not arrived (Inflight) and digests (Digest).
//
// It imports resource, store and cache, and no controller. A Queue is safe
// for concurrent use; typically one goroutine adds (the cache's
// subscription) and one takes (the runner). A Runner's cores are called
// from its goroutine only.
package reconcile

import (
	"context"
	"sync"
	"time"
)

// Queue is a deduplicating set of pending keys.
type Queue[K comparable] struct {
	mu      sync.Mutex
	pending map[K]struct{}
	wake    chan struct{} // holds one token while keys are pending
	timers  map[*time.Timer]struct{}
	closed  bool
}

// New returns an empty queue.
func New[K comparable]() *Queue[K] {
	return &Queue[K]{pending: map[K]struct{}{}, wake: make(chan struct{}, 1), timers: map[*time.Timer]struct{}{}}
}

// Add makes keys pending.
func (q *Queue[K]) Add(keys ...K) {
	if len(keys) == 0 {
		return
	}
	q.mu.Lock()
	for _, k := range keys {
		q.pending[k] = struct{}{}
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// AddAfter makes keys pending after d (a retry after a conflict or an error).
func (q *Queue[K]) AddAfter(d time.Duration, keys ...K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		q.mu.Lock()
		delete(q.timers, t)
		q.mu.Unlock()
		q.Add(keys...)
	})
	q.timers[t] = struct{}{}
}

// Next blocks until keys are pending or ctx ends, and returns every pending
// key, clearing the set. It returns nil when ctx ended.
func (q *Queue[K]) Next(ctx context.Context) []K {
	for {
		if out := q.Take(); out != nil {
			return out
		}
		select {
		case <-ctx.Done():
			return nil
		case <-q.wake:
		}
	}
}

// keepPending is the most pending keys whose map Take keeps for the next.
const keepPending = 4096

// Take returns every pending key, clearing the set, or nil when none is
// pending. It does not block.
func (q *Queue[K]) Take() []K {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil
	}
	out := make([]K, 0, len(q.pending))
	for k := range q.pending {
		out = append(out, k)
	}
	// A burst of up to keepPending keys leaves the map to the next (a
	// zone's initial sync adds a thousand keys a batch, a hundred times);
	// a larger one is dropped: clear keeps the buckets of the largest
	// burst (a start with 100,000 services) for good.
	if len(q.pending) <= keepPending {
		clear(q.pending)
	} else {
		q.pending = map[K]struct{}{}
	}
	return out
}

// Wake makes Ready receive once more even though nothing was added (a
// waiter that must look at something else, such as a revision).
func (q *Queue[K]) Wake() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Ready returns a channel that receives when keys may have become pending
// since the last Take; wait on it, then Take.
func (q *Queue[K]) Ready() <-chan struct{} { return q.wake }

// Batches delivers what Next returns on a channel, for controllers that
// also wait on tickers in one select. The channel is closed when ctx ends.
func (q *Queue[K]) Batches(ctx context.Context) <-chan []K {
	out := make(chan []K)
	go func() {
		defer close(out)
		for {
			keys := q.Next(ctx)
			if keys == nil {
				return
			}
			select {
			case out <- keys:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// Len returns how many keys are pending.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// Has reports whether k is pending.
func (q *Queue[K]) Has(k K) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.pending[k]
	return ok
}

// Scheduled returns how many AddAfter calls have not fired yet.
func (q *Queue[K]) Scheduled() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.timers)
}

// Close stops the retries scheduled with AddAfter.
func (q *Queue[K]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for t := range q.timers {
		t.Stop()
	}
	clear(q.timers)
}
