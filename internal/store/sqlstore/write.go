package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// maxGroupOps bounds the operations the writer puts in one transaction, so
// that a burst of writers does not make one huge transaction that holds the
// meta lock for long. A single batch larger than this still gets one
// transaction of its own.
const maxGroupOps = 1000

// Apply implements store.Store. If ctx ends before the writer has started
// on the batch, nothing is written and Apply returns ctx's error. If it
// ends later, Apply returns at once with an error wrapping ctx's error and
// saying that the batch may still commit; versions make retrying it safe.
func (s *Store) Apply(ctx context.Context, ops ...store.Op) ([]store.Result, error) {
	return s.queue.Apply(ctx, ops)
}

// commit writes group in one transaction and hands every request its
// outcome. When an operation breaks the transaction (a statement fails),
// its request fails alone and the others are written again without it
// (when the statement held the writes of several requests, as the
// pipelined writer's does, each request is written again in a
// transaction of its own); when the transaction fails as a whole (begin,
// lock, commit), which means the database is the problem, every request
// in it fails.
func (s *Store) commit(group []*backend.Request) {
	outcomes, last, culprit, err := s.runTx(group)
	if err != nil && culprit == unknownCulprit && len(group) > 1 {
		for _, r := range group {
			s.commit([]*backend.Request{r})
		}
		return
	}
	if err != nil && culprit >= 0 && len(group) > 1 {
		group[culprit].Done(backend.Outcome{Err: fmt.Errorf("apply: %w", err)})
		s.commit(slices.Concat(group[:culprit], group[culprit+1:]))
		return
	}
	if err == nil && last > 0 {
		s.notifier.Notify()
	}
	for i, r := range group {
		if err != nil {
			r.Done(backend.Outcome{Err: fmt.Errorf("apply: %w", err)})
			continue
		}
		r.Done(outcomes[i])
	}
}

// runTx executes the operations of group in one transaction. It returns
// the outcome per request (a request whose fence is not current fails as a
// whole with store.ErrFenced and writes nothing) and the last revision
// given out (0 when no operation succeeded). On failure, culprit is the
// index of the request whose operation failed the transaction, or -1.
func (s *Store) runTx(group []*backend.Request) (outcomes []backend.Outcome, last int64, culprit int, err error) {
	if s.d.Pipeline != nil {
		return s.runPipelined(group)
	}
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
	if err := tx.QueryRowContext(ctx, s.q.lockMetaWrite).Scan(&w.revision, &w.records); err != nil {
		return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("lock meta: %w", err))
	}
	base, recordsBase := w.revision, w.records
	outcomes = make([]backend.Outcome, len(group))
	for i, r := range group {
		if r.Fence != nil {
			current, err := w.fenced(r.Fence)
			if err != nil {
				return nil, 0, -1, err
			}
			if !current {
				outcomes[i] = backend.Fenced(r.Fence)
				continue
			}
		}
		results, err := r.Run(w.apply)
		if err != nil {
			return nil, 0, i, err
		}
		outcomes[i].Results = results
	}
	if w.records > recordsBase {
		if err := w.writeRecords(); err != nil {
			return nil, 0, -1, err
		}
	}
	if w.revision > base || w.records > recordsBase {
		if _, err := tx.ExecContext(ctx, s.q.setMeta, w.revision, w.records); err != nil {
			return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("store revision and record sequence: %w", err))
		}
	}
	if w.revision > base && s.d.Notify != nil {
		query, args := s.d.Notify(w.revision)
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("notify: %w", err))
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
	if w.pipe != nil {
		return w.fencedPiped(f)
	}
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
	// meta with the lock; recordRows and termRows are the values of the
	// rows appended, which writeRecords inserts before the commit.
	records              int64
	recordRows, termRows []any
	// events are the changes of this transaction, for Store.recent once
	// it commits.
	events []backend.RecentEvent

	// With Dialect.Pipeline (pipeline.go), tx and the statements are nil:
	// statements go through pipe. rows are the rows of the keys read or
	// written so far (nil for a key read and not found); written lists the
	// keys written, in order, once each (wrote); leaseOps are the lease
	// puts and deletions not sent yet. owners are the requests of the
	// statements queued and not sent yet (-1 for the transaction's own),
	// req the request being written, and culprit the request a failure
	// is charged to.
	pipe         Pipe
	rows         map[resource.Key]*row
	written      []resource.Key
	wrote        map[resource.Key]bool
	leaseOps     []leaseOp
	owners       []int
	req, culprit int
}

// apply executes one operation, prepared by backend.Prepare. A failure of the
// operation is in the Result; an error is a failure of the transaction.
func (w *writeTx) apply(op store.Op, p *backend.Prepared) (store.Result, error) {
	switch op.Type {
	case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease:
		return w.applyLease(op)
	case store.OpAppendRecord:
		return w.appendRecord(op)
	}
	if p == nil {
		p = &backend.Prepare([]store.Op{op})[0]
	}
	key, err := p.Key, p.Err
	if err != nil {
		return store.Result{Err: err}, nil
	}
	var cur *row
	if p.EncodeErr == nil {
		if cur, err = w.load(key); err != nil {
			return store.Result{}, err
		}
	}
	next, err := backend.Next(op, p, cur, w.now)
	if err != nil {
		return store.Result{Err: err}, nil
	}
	next.Revision = w.revision + 1
	if err := w.put(&next, cur != nil); err != nil {
		return store.Result{}, err
	}
	w.revision = next.Revision
	ev, err := w.s.recent.Event(op, &next, cur)
	if err != nil {
		return store.Result{}, err
	}
	w.events = append(w.events, ev)
	return backend.WriteResult(op, ev, &next, cur)
}

// load returns the row of key, live or tombstone, or nil.
func (w *writeTx) load(key resource.Key) (*row, error) {
	if w.pipe != nil {
		return w.loadPiped(key)
	}
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
	if w.pipe != nil {
		w.putPiped(r)
		return nil
	}
	var err error
	if exists {
		_, err = w.updateStmt.ExecContext(w.ctx, r.Version, r.Revision, r.Deleted, r.Labels, r.Spec, r.Status,
			r.Created, r.Modified, string(r.Key.Kind), r.Key.Mesh, r.Key.Name)
	} else {
		_, err = w.insertStmt.ExecContext(w.ctx, string(r.Key.Kind), r.Key.Mesh, r.Key.Name, r.Version, r.Revision,
			r.Deleted, r.Labels, r.Spec, r.Status, r.Created, r.Modified)
	}
	if err != nil {
		return w.s.dbErr(w.ctx, fmt.Errorf("write %s: %w", r.Key, err))
	}
	return nil
}
