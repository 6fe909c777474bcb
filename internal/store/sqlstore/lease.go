package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// applyLease executes a lease operation. Like apply, a failure of the
// operation is in the Result (and writes nothing); an error is a failure of
// the transaction. Lease operations give out no revision.
func (w *writeTx) applyLease(op store.Op) (store.Result, error) {
	l := op.Lease
	if l == nil {
		return store.Result{Err: fmt.Errorf("%s: no lease", op.Type)}, nil
	}
	if err := backend.CheckLeaseName(l.Name); err != nil {
		return store.Result{Err: fmt.Errorf("%s %q: %w", op.Type, l.Name, err)}, nil
	}
	if op.Type == store.OpDeleteLease {
		if w.pipe != nil {
			return w.leasePiped(op.Type, l.Name, nil, 0)
		}
		if _, err := w.leaseStmt(&w.deleteLeaseStmt, w.s.stmts.deleteLease).ExecContext(w.ctx, l.Name); err != nil {
			return store.Result{}, w.s.dbErr(w.ctx, fmt.Errorf("delete lease %q: %w", l.Name, err))
		}
		return store.Result{}, nil
	}
	if len(l.Value) > store.MaxLeaseValueBytes {
		return store.Result{Err: fmt.Errorf("%s %q: value: %w (%d bytes, limit %d)",
			op.Type, l.Name, store.ErrTooLarge, len(l.Value), store.MaxLeaseValueBytes)}, nil
	}
	expires, err := backend.EncodeExpiry(l.ExpiresAt)
	if err != nil {
		return store.Result{Err: fmt.Errorf("%s %q: %w", op.Type, l.Name, err)}, nil
	}
	value := l.Value
	if value == nil {
		value = []byte{} // the column is NOT NULL; a nil []byte binds as NULL
	}
	if w.pipe != nil {
		return w.leasePiped(op.Type, l.Name, value, expires)
	}
	if op.Type == store.OpCreateLease {
		res, err := w.leaseStmt(&w.createLeaseStmt, w.s.stmts.createLease).ExecContext(w.ctx, l.Name, value, expires)
		if err != nil {
			return store.Result{}, w.s.dbErr(w.ctx, fmt.Errorf("create lease %q: %w", l.Name, err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return store.Result{}, w.s.dbErr(w.ctx, fmt.Errorf("create lease %q: %w", l.Name, err))
		}
		if n == 0 {
			return store.Result{Err: fmt.Errorf("%s %q: %w", op.Type, l.Name, store.ErrAlreadyExists)}, nil
		}
		return store.Result{}, nil
	}
	if _, err := w.leaseStmt(&w.putLeaseStmt, w.s.stmts.putLease).ExecContext(w.ctx, l.Name, value, expires); err != nil {
		return store.Result{}, w.s.dbErr(w.ctx, fmt.Errorf("put lease %q: %w", l.Name, err))
	}
	return store.Result{}, nil
}

// leaseStmt returns the Store statement shared bound to the transaction,
// binding it on first use: most transactions hold no lease or record
// operation and need not pay for binding it. A failure to bind shows when
// it is run.
func (w *writeTx) leaseStmt(bound **sql.Stmt, shared *sql.Stmt) *sql.Stmt {
	if *bound == nil {
		*bound = w.tx.StmtContext(w.ctx, shared)
	}
	return *bound
}

// Leases implements store.Store. It reads with one statement, so one
// snapshot, through the primary key: a range scan when prefix is not
// empty. A prefix that is not printable ASCII matches no lease name.
func (s *Store) Leases(ctx context.Context, prefix string) ([]store.Lease, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("leases %q: %w", prefix, store.ErrClosed)
	}
	if !backend.PrintableASCII(prefix) {
		return nil, nil
	}
	var rows *sql.Rows
	var err error
	if prefix == "" {
		rows, err = s.reads.leasesAll.QueryContext(ctx)
	} else {
		rows, err = s.reads.leasesPrefix.QueryContext(ctx, prefix, backend.PrefixEnd(prefix))
	}
	if err != nil {
		return nil, fmt.Errorf("leases %q: %w", prefix, s.dbErr(ctx, err))
	}
	defer rows.Close()
	var leases []store.Lease
	for rows.Next() {
		var l store.Lease
		var expires int64
		// Scanning into *[]byte copies: the value belongs to the caller.
		if err := rows.Scan(&l.Name, &l.Value, &expires); err != nil {
			return nil, fmt.Errorf("leases %q: %w", prefix, s.dbErr(ctx, err))
		}
		if len(l.Value) == 0 {
			l.Value = nil // both backends alike, whatever the driver returns
		}
		l.ExpiresAt = backend.DecodeExpiry(expires)
		leases = append(leases, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("leases %q: %w", prefix, s.dbErr(ctx, err))
	}
	return leases, nil
}
