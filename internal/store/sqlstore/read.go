package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, k resource.Key) (*resource.Object, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("get %s: %w", k, store.ErrClosed)
	}
	r, err := scanRow(s.reads.get.QueryRowContext(ctx, string(k.Kind), k.Mesh, k.Name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get %s: %w", k, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", k, s.dbErr(ctx, err))
	}
	o, err := r.Object()
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", k, err)
	}
	return o, nil
}

// List implements store.Store. The objects and the revision come from one
// snapshot.
func (s *Store) List(ctx context.Context, k resource.Kind) ([]*resource.Object, int64, error) {
	if k != "" {
		if _, ok := resource.Lookup(k); !ok {
			return nil, 0, fmt.Errorf("list: unknown kind %q", k)
		}
	}
	dec := backend.NewListDecoder(ctx)
	var revision int64
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		if err := tx.StmtContext(ctx, s.reads.revision).QueryRowContext(ctx).Scan(&revision); err != nil {
			return s.dbErr(ctx, err)
		}
		var rows *sql.Rows
		var err error
		if k == "" {
			rows, err = tx.StmtContext(ctx, s.reads.listAll).QueryContext(ctx)
		} else {
			rows, err = tx.StmtContext(ctx, s.reads.listKind).QueryContext(ctx, string(k))
		}
		if err != nil {
			return s.dbErr(ctx, err)
		}
		return s.scanRows(ctx, rows, dec.Add)
	})
	var objs []*resource.Object
	if err == nil {
		objs, err = dec.Objects()
	}
	if err != nil {
		if k == "" {
			return nil, 0, fmt.Errorf("list: %w", err)
		}
		return nil, 0, fmt.Errorf("list %s: %w", k, err)
	}
	return objs, revision, nil
}

// Changes implements store.Store. A limit of 0 or less means no limit.
func (s *Store) Changes(ctx context.Context, after int64, limit int) ([]store.Event, error) {
	return s.ChangesKnown(ctx, after, limit, nil)
}

// ChangesKnown implements store.KnownFeed: a put known has is not
// decoded (the database's rows are read all the same).
func (s *Store) ChangesKnown(ctx context.Context, after int64, limit int, known store.Known) ([]store.Event, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	if s.isClosed() {
		return nil, fmt.Errorf("changes after %d: %w", after, store.ErrClosed)
	}
	if s.exclusive {
		if evs, ok := s.recent.Changes(after, limit, known); ok {
			return evs, nil
		}
	} else if last := s.recent.Last(); last > after {
		// Other processes write too: this one's writes are the latest only
		// if the database has none after them.
		var revision int64
		if err := s.reads.revision.QueryRowContext(ctx).Scan(&revision); err != nil {
			return nil, fmt.Errorf("changes after %d: %w", after, s.dbErr(ctx, err))
		}
		if revision == last {
			if evs, ok := s.recent.Changes(after, limit, known); ok {
				return evs, nil
			}
		}
	}
	return s.changesFromDB(ctx, after, limit, known)
}

// changesFromDB is Changes read from the database; a put known (when not
// nil) has is not decoded.
func (s *Store) changesFromDB(ctx context.Context, after int64, limit int, known store.Known) ([]store.Event, error) {
	var events []store.Event
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var compacted int64
		if err := tx.StmtContext(ctx, s.reads.compacted).QueryRowContext(ctx).Scan(&compacted); err != nil {
			return s.dbErr(ctx, err)
		}
		if after < compacted {
			return fmt.Errorf("%w: the oldest revision to resume from is %d", store.ErrCompacted, compacted)
		}
		rows, err := tx.StmtContext(ctx, s.reads.changes).QueryContext(ctx, after, limit)
		if err != nil {
			return s.dbErr(ctx, err)
		}
		return s.scanRows(ctx, rows, func(r *row) error {
			e := store.Event{Type: store.EventDelete, Revision: r.Revision, Key: r.Key}
			if !r.Deleted {
				e.Type = store.EventPut
				var ok bool
				if known != nil {
					e.Object, ok = known(r.Key, r.Revision)
				}
				if !ok {
					o, err := r.Object()
					if err != nil {
						return err
					}
					e.Object, e.Encoding = o, r.Encoding()
				}
			}
			events = append(events, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("changes after %d: %w", after, err)
	}
	return events, nil
}

// scanRows calls each for every row of rows and closes rows.
func (s *Store) scanRows(ctx context.Context, rows *sql.Rows, each func(*row) error) error {
	defer rows.Close()
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return s.dbErr(ctx, err)
		}
		if err := each(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return s.dbErr(ctx, err)
	}
	return nil
}

// readTx runs f in a read-only transaction with one snapshot.
func (s *Store) readTx(ctx context.Context, f func(*sql.Tx) error) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	opts := s.d.ReadTx
	tx, err := s.read.BeginTx(ctx, &opts)
	if err != nil {
		return s.dbErr(ctx, err)
	}
	defer func() { _ = tx.Rollback() }() // read only: nothing to commit
	return f(tx)
}

// Compact deletes the tombstones whose deletion is older than retention
// (by the store's clock) and advances the compaction horizon to the
// highest revision it deleted, so that Changes after an older revision
// returns store.ErrCompacted. It returns how many tombstones it deleted.
//
// Tombstones are what lets a reader that resumes from a revision see
// deletes; a reader that was away for longer than the retention must List
// again. Call Compact periodically (for example every few minutes with a
// retention of an hour or more); it is safe to call concurrently with
// everything, also from several processes sharing a database.
func (s *Store) Compact(ctx context.Context, retention time.Duration) (int, error) {
	if s.isClosed() {
		return 0, fmt.Errorf("compact: %w", store.ErrClosed)
	}
	n, err := s.compact(ctx, s.now().Add(-retention).UnixNano())
	if err != nil {
		return 0, fmt.Errorf("compact: %w", err)
	}
	return n, nil
}

func (s *Store) compact(ctx context.Context, before int64) (int, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.dbErr(ctx, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	var revision, n, horizon int64
	// The meta lock orders this transaction with the writers, as a write.
	if err := tx.QueryRowContext(ctx, s.q.lockMeta).Scan(&revision); err != nil {
		return 0, s.dbErr(ctx, err)
	}
	if err := tx.QueryRowContext(ctx, s.q.tombstones, before).Scan(&n, &horizon); err != nil {
		return 0, s.dbErr(ctx, err)
	}
	if n == 0 {
		return 0, nil
	}
	// Readers resuming below the new horizon must get ErrCompacted, which
	// only the database tells.
	s.recent.Clear()
	if _, err := tx.ExecContext(ctx, s.q.deleteTombstones, before); err != nil {
		return 0, s.dbErr(ctx, err)
	}
	if _, err := tx.ExecContext(ctx, s.q.setCompacted, horizon, horizon); err != nil {
		return 0, s.dbErr(ctx, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, s.dbErr(ctx, err)
	}
	return int(n), nil
}
