package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// DefaultWriteTimeout bounds one write transaction.
const DefaultWriteTimeout = 30 * time.Second

// Config is what a backend hands to Open.
type Config struct {
	Dialect Dialect
	// Read serves Get, List, Changes and Leases; Write serves the writer and
	// Compact. They may be the same *sql.DB. Open takes ownership: Close
	// closes them.
	Read, Write *sql.DB
	// Now is the clock that stamps creation and modification times and
	// ages tombstones (default time.Now).
	Now func() time.Time
	// Notifier is woken after every commit that gave out revisions and at
	// Close. A backend that learns of other processes' writes (PostgreSQL
	// LISTEN) notifies the same Notifier. Nil means a private one.
	Notifier *store.Notifier
	// WriteTimeout bounds one write transaction (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// Exclusive says no other process writes the database (the embedded
	// store holds a lock on its directory): Changes may then trust the
	// writes of this process alone to be the latest (see backend.Recent).
	Exclusive bool
}

// Store implements store.Store over database/sql. See the package doc.
type Store struct {
	d           Dialect
	q           queries
	pq          pipelineQueries // with Dialect.Pipeline
	read, write *sql.DB
	// stmts are the writer's per-operation statements, prepared once:
	// parsing them for every operation costs more than running them.
	stmts struct {
		load, insert, update, putLease, createLease, deleteLease, fence *sql.Stmt
	}
	// reads are the read statements, prepared once on the read pool for
	// the same reason (SQLite spends most of a point read parsing SQL).
	reads    struct{ get, revision, compacted, changes, listAll, listKind, leasesAll, leasesPrefix *sql.Stmt }
	now      func() time.Time
	notifier *store.Notifier
	// recent serves Changes to readers that are nearly caught up;
	// exclusive is Config.Exclusive.
	recent       backend.Recent
	exclusive    bool
	writeTimeout time.Duration

	// queue holds the Apply calls the writer takes up in groups.
	queue *backend.Queue

	writerDone chan struct{}
}

var (
	_ store.Store     = (*Store)(nil)
	_ store.KnownFeed = (*Store)(nil)
)

// Open applies the dialect's migrations and starts the writer.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s := &Store{
		d:            cfg.Dialect,
		q:            newQueries(&cfg.Dialect),
		read:         cfg.Read,
		write:        cfg.Write,
		now:          cfg.Now,
		notifier:     cfg.Notifier,
		writeTimeout: cfg.WriteTimeout,
		exclusive:    cfg.Exclusive,
		writerDone:   make(chan struct{}),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.notifier == nil {
		s.notifier = &store.Notifier{}
	}
	if s.writeTimeout <= 0 {
		s.writeTimeout = DefaultWriteTimeout
	}
	if s.d.Pipeline != nil {
		s.pq = newPipelineQueries()
	}
	s.queue = backend.NewQueue()
	if err := s.migrate(ctx); err != nil {
		_ = s.closeDBs() // the migration error is the one to report
		return nil, fmt.Errorf("%s: migrate: %w", s.d.Name, err)
	}
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&s.stmts.load, s.q.load}, {&s.stmts.insert, s.q.insert}, {&s.stmts.update, s.q.update},
		{&s.stmts.putLease, s.q.putLease}, {&s.stmts.createLease, s.q.createLease}, {&s.stmts.deleteLease, s.q.deleteLease},
		{&s.stmts.fence, s.q.fence}} {
		var err error
		if *p.stmt, err = s.write.PrepareContext(ctx, p.query); err != nil {
			_ = s.closeDBs() // closes the statements prepared so far
			return nil, fmt.Errorf("%s: prepare: %w", s.d.Name, s.dbErr(ctx, err))
		}
	}
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&s.reads.get, s.q.get}, {&s.reads.revision, s.q.revision}, {&s.reads.compacted, s.q.compacted},
		{&s.reads.changes, s.q.changes}, {&s.reads.listAll, s.q.listAll}, {&s.reads.listKind, s.q.listKind},
		{&s.reads.leasesAll, s.q.leasesAll}, {&s.reads.leasesPrefix, s.q.leasesPrefix}} {
		var err error
		if *p.stmt, err = s.read.PrepareContext(ctx, p.query); err != nil {
			_ = s.closeDBs()
			return nil, fmt.Errorf("%s: prepare: %w", s.d.Name, s.dbErr(ctx, err))
		}
	}
	go s.queue.Serve(maxGroupOps, s.commit, s.writerDone)
	return s, nil
}

// Changed implements store.Store.
func (s *Store) Changed() <-chan struct{} { return s.notifier.C() }

// Close implements store.Store: it waits for the writes already queued,
// wakes Changed waiters and closes the databases. A second Close returns
// store.ErrClosed.
func (s *Store) Close() error {
	if !s.queue.Close() {
		return fmt.Errorf("%s: close: %w", s.d.Name, store.ErrClosed)
	}

	<-s.writerDone
	err := s.closeDBs()
	s.notifier.Notify()
	if err != nil {
		return fmt.Errorf("%s: close: %w", s.d.Name, err)
	}
	return nil
}

func (s *Store) closeDBs() error {
	var err error
	for _, stmt := range []*sql.Stmt{s.stmts.load, s.stmts.insert, s.stmts.update, s.stmts.putLease, s.stmts.createLease, s.stmts.deleteLease, s.stmts.fence,
		s.reads.get, s.reads.revision, s.reads.compacted, s.reads.changes, s.reads.listAll, s.reads.listKind,
		s.reads.leasesAll, s.reads.leasesPrefix} {
		if stmt != nil {
			err = errors.Join(err, stmt.Close())
		}
	}
	err = errors.Join(err, s.write.Close())
	if s.read != s.write {
		err = errors.Join(err, s.read.Close())
	}
	return err
}

func (s *Store) isClosed() bool { return s.queue.Closed() }

// dbErr classifies an error that came from the database: ErrClosed once
// the store is closed, the context's error when ctx ended, ErrUnavailable
// otherwise (the database could not do what was asked; a later attempt may
// succeed).
func (s *Store) dbErr(ctx context.Context, err error) error {
	switch {
	case s.isClosed():
		return store.ErrClosed
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return err
	case s.d.DiskFull != nil && s.d.DiskFull(err):
		return fmt.Errorf("%w: %w: %w", store.ErrUnavailable, store.ErrDiskFull, err)
	default:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
}
