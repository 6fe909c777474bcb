package reconcile

import (
	"context"
	"errors"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

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
