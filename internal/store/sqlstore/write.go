package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// maxGroupOps bounds the operations the writer puts in one transaction, so
// that a burst of writers does not make one huge transaction that holds the
// meta lock for long. A single batch larger than this still gets one
// transaction of its own.
const maxGroupOps = 1000

// Request states: the writer claims a pending request before it starts its
// transaction; Apply abandons it when the caller's context ends first.
const (
	pending int32 = iota
	claimed
	abandoned
)

// request is one Apply call waiting for the writer.
type request struct {
	ops []store.Op
	// prep are the ops checked and encoded by the caller, so that the
	// writer, which runs one transaction at a time, does only what needs
	// the transaction.
	prep []prepared
	// fence, when not nil, must be current for ops to be written.
	fence *store.Fence
	state atomic.Int32
	// done receives the outcome once, after the commit (or failure) of the
	// transaction that held the request.
	done chan outcome
}

type outcome struct {
	results []store.Result
	err     error
}

// Apply implements store.Store. If ctx ends before the writer has started
// on the batch, nothing is written and Apply returns ctx's error. If it
// ends later, Apply returns at once with an error wrapping ctx's error and
// saying that the batch may still commit; versions make retrying it safe.
func (s *Store) Apply(ctx context.Context, ops ...store.Op) ([]store.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	r := &request{ops: ops, prep: prepare(ops), done: make(chan outcome, 1)}
	if f, ok := store.FenceFrom(ctx); ok {
		if err := backend.CheckLeaseName(f.Lease); err != nil {
			return nil, fmt.Errorf("apply: fence %q: %w", f.Lease, err)
		}
		r.fence = &f
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("apply: %w", store.ErrClosed)
	}
	if len(ops) == 0 {
		s.mu.Unlock()
		return []store.Result{}, nil
	}
	s.queue = append(s.queue, r)
	s.cond.Signal()
	s.mu.Unlock()

	select {
	case o := <-r.done:
		return o.results, o.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(pending, abandoned) {
			return nil, fmt.Errorf("apply: %w", ctx.Err())
		}
		return nil, fmt.Errorf("apply: %w (the batch was already being written and may still commit)", ctx.Err())
	}
}

// writeLoop is the writer goroutine: it commits queued requests in groups
// until the store is closed and the queue is empty.
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	for {
		group := s.take()
		if group == nil {
			return
		}
		s.commit(group)
	}
}

// take waits for queued requests and claims up to maxGroupOps operations
// worth of them, in queue order. It returns nil when the store is closed
// and nothing is left to write.
func (s *Store) take() []*request {
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return nil
		}
		n, ops := 0, 0
		for n < len(s.queue) && (n == 0 || ops+len(s.queue[n].ops) <= maxGroupOps) {
			ops += len(s.queue[n].ops)
			n++
		}
		taken := s.queue[:n]
		s.queue = append([]*request(nil), s.queue[n:]...) // let taken requests be collected
		s.mu.Unlock()

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

// commit writes group in one transaction and hands every request its
// outcome. When an operation breaks the transaction (a statement fails),
// its request fails alone and the others are written again without it;
// when the transaction fails as a whole (begin, lock, commit), which means
// the database is the problem, every request in it fails.
func (s *Store) commit(group []*request) {
	outcomes, last, culprit, err := s.runTx(group)
	if err != nil && culprit >= 0 && len(group) > 1 {
		group[culprit].done <- outcome{err: fmt.Errorf("apply: %w", err)}
		s.commit(slices.Concat(group[:culprit], group[culprit+1:]))
		return
	}
	if err == nil && last > 0 {
		s.notifier.Notify()
	}
	for i, r := range group {
		if err != nil {
			r.done <- outcome{err: fmt.Errorf("apply: %w", err)}
			continue
		}
		r.done <- outcomes[i]
	}
}

// runTx executes the operations of group in one transaction. It returns
// the outcome per request (a request whose fence is not current fails as a
// whole with store.ErrFenced and writes nothing) and the last revision
// given out (0 when no operation succeeded). On failure, culprit is the
// index of the request whose operation failed the transaction, or -1.
func (s *Store) runTx(group []*request) (outcomes []outcome, last int64, culprit int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("begin: %w", err))
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	w := &writeTx{s: s, ctx: ctx, tx: tx, now: s.now().UnixNano(),
		loadStmt:   tx.StmtContext(ctx, s.stmts.load),
		insertStmt: tx.StmtContext(ctx, s.stmts.insert),
		updateStmt: tx.StmtContext(ctx, s.stmts.update),
	}
	if err := tx.QueryRowContext(ctx, s.q.lockMeta).Scan(&w.revision); err != nil {
		return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("lock meta: %w", err))
	}
	base := w.revision
	outcomes = make([]outcome, len(group))
	for i, r := range group {
		if r.fence != nil {
			current, err := w.fenced(r.fence)
			if err != nil {
				return nil, 0, -1, err
			}
			if !current {
				outcomes[i].err = fmt.Errorf("apply: lease %q, holder %q, term %d: %w", r.fence.Lease, r.fence.Holder, r.fence.Term, store.ErrFenced)
				continue
			}
		}
		results := make([]store.Result, len(r.ops))
		for j, op := range r.ops {
			if err := backend.Dependencies(op, j, results); err != nil {
				results[j] = store.Result{Err: err}
				continue
			}
			if results[j], err = w.apply(op, r.prepared(j)); err != nil {
				return nil, 0, i, err
			}
		}
		outcomes[i].results = results
	}
	if w.records > w.recordsBase {
		if _, err := tx.StmtContext(ctx, s.stmts.setRecordSeq).ExecContext(ctx, w.records); err != nil {
			return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("store record sequence: %w", err))
		}
	}
	if w.revision > base {
		if _, err := tx.ExecContext(ctx, s.q.setRevision, w.revision); err != nil {
			return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("store revision: %w", err))
		}
		if s.d.Notify != nil {
			if err := s.d.Notify(ctx, tx, w.revision); err != nil {
				return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("notify: %w", err))
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("commit: %w", err))
	}
	s.recent.Add(w.events)
	if w.revision == base {
		return outcomes, 0, -1, nil
	}
	return outcomes, w.revision, -1, nil
}

// fenced reports whether the lease of f still holds f's holder and term
// and has not expired by the database's clock. On PostgreSQL the row stays
// share-locked until commit: a takeover, which updates it, waits for this
// transaction, and a check waiting behind a takeover sees the new holder.
func (w *writeTx) fenced(f *store.Fence) (bool, error) {
	var one int
	err := w.leaseStmt(&w.fenceStmt, w.s.stmts.fence).QueryRowContext(w.ctx, f.Lease, f.LeaseValue()).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, w.s.dbErr(w.ctx, fmt.Errorf("check fence %q: %w", f.Lease, err))
	}
	return true, nil
}

// writeTx is one write transaction in progress.
type writeTx struct {
	s        *Store
	ctx      context.Context
	tx       *sql.Tx
	now      int64 // Unix nanoseconds, one reading of the clock per transaction
	revision int64 // the last revision given out

	loadStmt, insertStmt, updateStmt *sql.Stmt // Store.stmts bound to tx
	// putLeaseStmt, createLeaseStmt, deleteLeaseStmt and fenceStmt are
	// bound on first use (leaseStmt).
	putLeaseStmt, createLeaseStmt, deleteLeaseStmt, fenceStmt *sql.Stmt

	// records is the last record sequence number given out, read from
	// meta at the first record of the transaction (recordsRead), and
	// recordsBase its value then. The record statements are bound on
	// first use.
	records, recordsBase                   int64
	recordsRead                            bool
	insertRecordStmt, insertRecordTermStmt *sql.Stmt
	// events are the changes of this transaction, for Store.recent once
	// it commits.
	events []backend.RecentEvent
}

// prepared is an operation on a resource checked and encoded.
type prepared struct {
	key resource.Key
	row row   // what the operation writes (not for deletes)
	err error // the operation fails with it
	// encodeErr is an encoding failure, reported with the operation.
	encodeErr error
}

// prepare checks and encodes the resource operations of ops.
func prepare(ops []store.Op) []prepared {
	var out []prepared
	for i, op := range ops {
		switch op.Type {
		case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease, store.OpAppendRecord:
			continue
		}
		if out == nil {
			out = make([]prepared, len(ops))
		}
		p := &out[i]
		var d *resource.Descriptor
		if p.key, d, p.err = backend.Check(op); p.err != nil || op.Type == store.OpDelete {
			continue
		}
		var e backend.Encoded
		e, p.encodeErr = backend.Encode(op.Object, op.Type, d)
		p.row = row{labels: e.Labels, spec: e.Spec, status: e.Status}
	}
	return out
}

// prepared returns the preparation of the request's op i.
func (r *request) prepared(i int) *prepared {
	if r.prep == nil {
		return nil
	}
	return &r.prep[i]
}

// apply executes one operation, prepared by prepare. A failure of the
// operation is in the Result; an error is a failure of the transaction.
func (w *writeTx) apply(op store.Op, p *prepared) (store.Result, error) {
	switch op.Type {
	case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease:
		return w.applyLease(op)
	case store.OpAppendRecord:
		return w.appendRecord(op)
	}
	if p == nil {
		p = &prepare([]store.Op{op})[0]
	}
	key, err := p.key, p.err
	if err != nil {
		return store.Result{Err: err}, nil
	}
	fail := func(err error, detail string) (store.Result, error) {
		return store.Result{Err: fmt.Errorf("%s %s: %w%s", op.Type, key, err, detail)}, nil
	}

	next := p.row
	if p.encodeErr != nil {
		return fail(p.encodeErr, "")
	}
	cur, err := w.load(key)
	if err != nil {
		return store.Result{}, err
	}
	live := cur != nil && !cur.deleted
	switch op.Type {
	case store.OpCreate:
		if live {
			return fail(store.ErrAlreadyExists, "")
		}
		next.version, next.created = 1, w.now
	case store.OpUpdate, store.OpUpdateStatus, store.OpDelete, store.OpPatchStatus:
		want := op.Version
		if op.Type != store.OpDelete {
			want = op.Object.Version
		}
		switch {
		case !live:
			return fail(store.ErrNotFound, "")
		case op.Type == store.OpPatchStatus:
			// Not versioned: the writer replaces only what it owns.
		case op.Type != store.OpDelete || want != 0:
			if want != cur.version {
				return fail(store.ErrConflict, fmt.Sprintf(" (version %d, stored %d)", want, cur.version))
			}
		}
		next.version, next.created = cur.version+1, cur.created
		switch op.Type {
		case store.OpUpdate:
			next.status = cur.status
		case store.OpUpdateStatus:
			next.labels, next.spec = cur.labels, cur.spec
		case store.OpPatchStatus:
			next.labels, next.spec = cur.labels, cur.spec
			if next.status, err = backend.PatchStatus(cur.status, next.status, op.Patch); err != nil {
				return fail(err, "")
			}
		case store.OpDelete:
			next.deleted = true // a tombstone keeps no labels, spec or status
		}
	}
	if next.size() > store.MaxObjectBytes {
		return fail(store.ErrTooLarge, fmt.Sprintf(" (%d bytes, limit %d)", next.size(), store.MaxObjectBytes))
	}
	next.key, next.modified = key, w.now
	next.revision = w.revision + 1
	if err := w.put(&next, cur != nil); err != nil {
		return store.Result{}, err
	}
	w.revision = next.revision
	if next.deleted {
		w.events = append(w.events, backend.RecentEvent{Rev: next.revision, Key: key})
		return store.Result{Revision: next.revision}, nil
	}
	obj, err := w.stored(op, &next, cur)
	if err != nil {
		return store.Result{}, err
	}
	w.events = append(w.events, backend.RecentEvent{Rev: next.revision, Key: key, Obj: obj})
	if op.DiscardObject {
		return store.Result{Revision: next.revision}, nil
	}
	return store.Result{Object: obj.Clone(), Revision: next.revision}, nil
}

// stored returns the resource op wrote as next over cur, for readers only
// (Store.recent; callers get a clone). Nothing of it is decoded that the
// writer already has, since the writer runs one transaction at a time: a
// create or an update wrote op.Object's labels and spec as they are, and
// a status write kept those of the previous write of the resource, which
// recent usually still holds; only a status is decoded then.
func (w *writeTx) stored(op store.Op, next, cur *row) (*resource.Object, error) {
	var obj *resource.Object
	switch op.Type {
	case store.OpCreate, store.OpUpdate:
		obj = op.Object.Clone()
		if len(obj.Labels) == 0 {
			obj.Labels = nil
		}
		if op.Type == store.OpCreate {
			return w.stamp(obj, next), nil
		}
	default:
		prev := w.s.recent.ObjectBefore(next.key)
		if prev == nil || cur == nil || prev.Revision != cur.revision {
			return next.object()
		}
		c := *prev // labels and spec are read-only and shared
		obj = &c
	}
	var err error
	if obj.Status, err = resource.UnmarshalStatus(next.key.Kind, []byte(next.status)); err != nil {
		return nil, fmt.Errorf("decode %s: %w", next.key, err)
	}
	return w.stamp(obj, next), nil
}

// stamp sets the metadata of next on obj.
func (w *writeTx) stamp(obj *resource.Object, next *row) *resource.Object {
	obj.Version, obj.Revision = next.version, next.revision
	obj.CreationTime, obj.ModificationTime = time.Unix(0, next.created).UTC(), time.Unix(0, next.modified).UTC()
	return obj
}

// load returns the row of key, live or tombstone, or nil.
func (w *writeTx) load(key resource.Key) (*row, error) {
	r, err := scanRow(w.loadStmt.QueryRowContext(w.ctx, string(key.Kind), key.Mesh, key.Name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, w.s.dbErr(w.ctx, fmt.Errorf("load %s: %w", key, err))
	}
	return r, nil
}

// put writes r, replacing the existing row of its key when exists.
func (w *writeTx) put(r *row, exists bool) error {
	var err error
	if exists {
		_, err = w.updateStmt.ExecContext(w.ctx, r.version, r.revision, r.deleted, r.labels, r.spec, r.status,
			r.created, r.modified, string(r.key.Kind), r.key.Mesh, r.key.Name)
	} else {
		_, err = w.insertStmt.ExecContext(w.ctx, string(r.key.Kind), r.key.Mesh, r.key.Name, r.version, r.revision,
			r.deleted, r.labels, r.spec, r.status, r.created, r.modified)
	}
	if err != nil {
		return w.s.dbErr(w.ctx, fmt.Errorf("write %s: %w", r.key, err))
	}
	return nil
}
