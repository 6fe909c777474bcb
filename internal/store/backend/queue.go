package backend

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Request states: the writer claims a pending request before it writes
// it; Apply abandons it when the caller's context ends first.
const (
	pending int32 = iota
	claimed
	abandoned
)

// Request is one Apply call waiting for the writer.
type Request struct {
	Ops []store.Op
	// Prep are the resource operations of Ops checked and encoded by the
	// caller (Prepare), so that the writer, which writes one group at a
	// time, does only what needs it.
	Prep []Prepared
	// Fence, when not nil, must be current for Ops to be written.
	Fence *store.Fence
	state atomic.Int32
	done  chan Outcome
}

// Outcome is what Apply returns for a request.
type Outcome struct {
	Results []store.Result
	Err     error
}

// Prepared returns the preparation of the request's operation i: for an
// operation on a resource, what Prepare made of it.
func (r *Request) Prepared(i int) *Prepared {
	if r.Prep == nil {
		return nil
	}
	return &r.Prep[i]
}

// Done hands the request its outcome; call it once.
func (r *Request) Done(o Outcome) { r.done <- o }

// NewClaimed returns a request for ops as a writer holds it after Take:
// for tests that drive a writer directly.
func NewClaimed(ops []store.Op) *Request {
	r := &Request{Ops: ops, Prep: Prepare(ops), done: make(chan Outcome, 1)}
	r.state.Store(claimed)
	return r
}

// Wait returns the outcome handed to Done, waiting for it.
func (r *Request) Wait() Outcome { return <-r.done }

// Prepared is a resource operation checked and encoded.
type Prepared struct {
	Key resource.Key
	// Enc is what the operation writes (nothing for deletes).
	Enc Encoded
	// Err fails the operation; EncodeErr is an encoding failure, reported
	// with the operation and its key.
	Err, EncodeErr error
}

// Prepare checks and encodes the resource operations of ops (nil when
// there is none).
func Prepare(ops []store.Op) []Prepared {
	var out []Prepared
	for i, op := range ops {
		switch op.Type {
		case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease, store.OpAppendRecord:
			continue
		}
		if out == nil {
			out = make([]Prepared, len(ops))
		}
		p := &out[i]
		var d *resource.Descriptor
		if p.Key, d, p.Err = Check(op); p.Err != nil || op.Type == store.OpDelete {
			continue
		}
		p.Enc, p.EncodeErr = Encode(op.Object, op.Type, d)
	}
	return out
}

// Queue holds the Apply calls that a store's one writer goroutine takes up
// in groups (group commit). The zero value is not ready: use NewQueue.
// Safe for concurrent use.
type Queue struct {
	mu     sync.Mutex
	cond   *sync.Cond // signals the writer: queue non-empty or closed
	queue  []*Request
	closed bool
}

// NewQueue returns an empty, open queue.
func NewQueue() *Queue {
	q := &Queue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Apply queues ops and waits for the writer's outcome. If ctx ends before
// the writer has claimed the request, nothing is written and Apply returns
// ctx's error; if it ends later, Apply returns at once with an error
// wrapping ctx's error and saying that the batch may still commit
// (versions make retrying it safe).
func (q *Queue) Apply(ctx context.Context, ops []store.Op) ([]store.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	r := &Request{Ops: ops, Prep: Prepare(ops), done: make(chan Outcome, 1)}
	if f, ok := store.FenceFrom(ctx); ok {
		if err := CheckLeaseName(f.Lease); err != nil {
			return nil, fmt.Errorf("apply: fence %q: %w", f.Lease, err)
		}
		r.Fence = &f
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil, fmt.Errorf("apply: %w", store.ErrClosed)
	}
	if len(ops) == 0 {
		q.mu.Unlock()
		return []store.Result{}, nil
	}
	q.queue = append(q.queue, r)
	q.cond.Signal()
	q.mu.Unlock()

	select {
	case o := <-r.done:
		return o.Results, o.Err
	case <-ctx.Done():
		if r.state.CompareAndSwap(pending, abandoned) {
			return nil, fmt.Errorf("apply: %w", ctx.Err())
		}
		return nil, fmt.Errorf("apply: %w (the batch was already being written and may still commit)", ctx.Err())
	}
}

// Serve is a store's writer goroutine: it hands commit the queued
// requests in groups of up to maxOps operations (Take) until the queue is
// closed and empty, then closes done.
func (q *Queue) Serve(maxOps int, commit func(group []*Request), done chan<- struct{}) {
	defer close(done)
	for {
		group := q.Take(maxOps)
		if group == nil {
			return
		}
		commit(group)
	}
}

// Take waits for queued requests and claims up to maxOps operations worth
// of them, in queue order (a single larger request is taken alone). It
// returns nil when the queue is closed and empty.
func (q *Queue) Take(maxOps int) []*Request {
	for {
		q.mu.Lock()
		for len(q.queue) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.queue) == 0 {
			q.mu.Unlock()
			return nil
		}
		n, ops := 0, 0
		for n < len(q.queue) && (n == 0 || ops+len(q.queue[n].Ops) <= maxOps) {
			ops += len(q.queue[n].Ops)
			n++
		}
		taken := q.queue[:n]
		q.queue = append([]*Request(nil), q.queue[n:]...) // let taken requests be collected
		q.mu.Unlock()

		group := taken[:0]
		for _, r := range taken {
			if r.state.CompareAndSwap(pending, claimed) {
				group = append(group, r)
			}
		}
		if len(group) > 0 {
			return group
		}
	}
}

// Close stops accepting requests; Take still hands out those queued. It
// reports false when the queue was closed already.
func (q *Queue) Close() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.closed = true
	q.cond.Signal()
	return true
}

// Closed reports whether Close was called.
func (q *Queue) Closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// Run applies r's operations in order with apply, each once the
// operations it depends on succeeded, and returns their results; an error
// of apply is a failure of the whole group, returned as is.
func (r *Request) Run(apply func(op store.Op, p *Prepared) (store.Result, error)) ([]store.Result, error) {
	results := make([]store.Result, len(r.Ops))
	for j, op := range r.Ops {
		if err := Dependencies(op, j, results); err != nil {
			results[j] = store.Result{Err: err}
			continue
		}
		var err error
		if results[j], err = apply(op, r.Prepared(j)); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// Fenced is the outcome of a request whose fence f is not current.
func Fenced(f *store.Fence) Outcome {
	return Outcome{Err: fmt.Errorf("apply: lease %q, holder %q, term %d: %w", f.Lease, f.Holder, f.Term, store.ErrFenced)}
}
