// Package reconcile holds the generic machinery controllers share: a set of
// pending keys that deduplicates bursts (a thousand events for one key are
// one unit of work) and hands out everything pending at once, so that a
// controller can process a batch and write its results in one transaction.
//
// It has no domain code and imports only the standard library. A Queue is
// safe for concurrent use; typically one goroutine adds (the cache's
// subscription) and one takes (the controller).
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
		q.mu.Lock()
		if len(q.pending) > 0 {
			out := make([]K, 0, len(q.pending))
			for k := range q.pending {
				out = append(out, k)
			}
			// A new map rather than clear: clear keeps the buckets of the
			// largest burst (a start with 100,000 services) for good.
			q.pending = map[K]struct{}{}
			q.mu.Unlock()
			return out
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-q.wake:
		}
	}
}

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
