// Package sqlite is the embedded store backend, the default: one SQLite
// database (modernc.org/sqlite, pure Go) in a data directory that a single
// meshnames process owns. It is sqlstore with the SQLite dialect, plus the
// data-directory lock.
//
// Durability: the database runs in WAL mode with synchronous=FULL, so a
// write is on disk when Apply returns and survives kill -9 and power loss.
// sqlstore's group commit shares one fsync among concurrent writers.
//
// Exclusivity: Open takes an exclusive flock on dir/LOCK (holding our pid)
// and fails at once when another process, or another Store in this
// process, holds it. Notifications are therefore in-process only.
//
// Backup (store.Backuper) copies the database with VACUUM INTO a
// temporary dir/.backup-* and writes it as a tar of meshnames.db; Open
// removes such a directory that a crash left.
//
// It imports store, store/backend and store/sqlstore; it must not import anything above
// store (cache, apiserver, server). A Store is safe for concurrent use; one
// connection writes, a small pool reads.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
	"github.com/meshnames/meshnames/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// File names inside the data directory.
const (
	LockFile     = "LOCK"
	DatabaseFile = "meshnames.db"
)

// NowNanos is SQLite's clock as Unix nanoseconds (millisecond precision),
// the time fenced leases expire by. One process owns the database, so it is
// that process's clock.
const NowNanos = `CAST(unixepoch('subsec') * 1000000000 AS INTEGER)`

// readers is the size of the read connection pool. SQLite in WAL mode
// reads concurrently with the writer.
const readers = 4

// Option configures Open.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock sets the clock that stamps creation and modification times
// and ages tombstones (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// Store is the SQLite store. Compact is sqlstore.Store.Compact.
type Store struct {
	*sqlstore.Store
	dir       string  // the data directory, absolute
	write     *sql.DB // the writer's connection, for tests of its settings
	lock      *os.File
	closeOnce sync.Once
	closed    atomic.Bool
}

var (
	_ store.Store     = (*Store)(nil)
	_ store.Compacter = (*Store)(nil)
	_ store.Backuper  = (*Store)(nil)
)

// Open opens (creating when needed) the store in dir.
func Open(dir string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sqlite: data dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: data dir: %w", err)
	}
	lock, err := backend.LockDir(dir, LockFile)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := backend.RemoveBackupTemps(dir); err != nil {
		_ = lock.Close() // releases the flock
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	s, write, err := open(dir, &o)
	if err != nil {
		_ = lock.Close() // releases the flock
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return &Store{Store: s, dir: dir, write: write, lock: lock}, nil
}

func open(dir string, o *options) (*sqlstore.Store, *sql.DB, error) {
	migrations, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, nil, err
	}
	dsn := func(extra ...string) string {
		return fileDSN(filepath.Join(dir, DatabaseFile), append([]string{
			"_pragma=busy_timeout(10000)",
			"_pragma=journal_mode(WAL)",
			"_pragma=synchronous(FULL)",
			"_txlock=immediate", // write transactions take the write lock at BEGIN
		}, extra...)...)
	}
	write, err := sql.Open("sqlite", dsn())
	if err != nil {
		return nil, nil, err
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	read, err := sql.Open("sqlite", dsn("_pragma=query_only(1)"))
	if err != nil {
		_ = write.Close()
		return nil, nil, err
	}
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers)
	read.SetConnMaxLifetime(0)
	s, err := sqlstore.Open(context.Background(), sqlstore.Config{
		Exclusive: true, // the lock on the data directory
		Dialect: sqlstore.Dialect{
			Name:       "sqlite",
			Migrations: migrations,
			// A read transaction sees one WAL snapshot from its first
			// read; read-only transactions BEGIN DEFERRED despite _txlock.
			ReadTx:   sql.TxOptions{ReadOnly: true},
			NowNanos: NowNanos,
		},
		Read:  read,
		Write: write,
		Now:   o.now,
	})
	return s, write, err
}

// fileDSN is the data source name of the database file path with query
// parameters q.
func fileDSN(path string, q ...string) string {
	u := url.URL{Scheme: "file", Path: path}
	return u.String() + "?" + strings.Join(q, "&")
}

// Close closes the database and releases the data directory.
func (s *Store) Close() error {
	s.closed.Store(true)
	err := s.Store.Close()
	if errors.Is(err, store.ErrClosed) {
		return err
	}
	s.closeOnce.Do(func() {
		err = errors.Join(err, s.lock.Close()) // releases the flock
	})
	return err
}
