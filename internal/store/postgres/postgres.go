// Package postgres is the shared store backend: several meshnames
// instances use one PostgreSQL database (or one schema of it, chosen with
// search_path in the URL). It is sqlstore with the PostgreSQL dialect, plus
// a listener that wakes this instance's readers when another instance
// commits.
//
// Migrations run at Open under a transaction-scoped advisory lock, so
// instances starting together are safe. Revisions follow commit order
// across instances (see sqlstore). Every write transaction sends
// pg_notify('meshnames_changes', payload) with the schema in the payload;
// PostgreSQL delivers it at commit. A listener goroutine with its own
// connection LISTENs and wakes Changed waiters for notifications of its
// schema from other instances (this instance's own commits wake them
// directly). When that connection drops, the listener reconnects with
// backoff and wakes waiters once after reconnecting, since notifications
// sent in between are lost; readers resume from their revision, so nothing
// is missed. A slow safety poll wakes waiters anyway.
//
// Errors reaching the database wrap store.ErrUnavailable.
//
// It imports store and store/sqlstore; it must not import anything above
// store (cache, apiserver, server). A Store is safe for concurrent use.
package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Channel is the NOTIFY channel every instance uses; payloads carry the
// schema, so instances of other schemas ignore them.
const Channel = "meshnames_changes"

// migrationLockKey is the first key of the advisory lock that serializes
// migrations; the second is a hash of the schema, so that schemas migrate
// independently.
const migrationLockKey = 0x6d6e7331 // "mns1"

// NowNanos is the database's clock as Unix nanoseconds (microsecond
// precision): the time leases expire by, whatever the clocks of the
// instances say. clock_timestamp, not now(), which stops at the start of
// the transaction.
const NowNanos = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000)::BIGINT`

// DefaultPollInterval is how often waiters are woken even without a
// notification.
const DefaultPollInterval = 5 * time.Second

// Option configures Open.
type Option func(*options)

type options struct {
	now      func() time.Time
	poll     time.Duration
	maxConns int
	log      *slog.Logger
}

// WithClock sets the clock that stamps creation and modification times
// and ages tombstones (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithPollInterval sets the safety poll (default DefaultPollInterval).
func WithPollInterval(d time.Duration) Option {
	return func(o *options) { o.poll = d }
}

// WithMaxConns bounds the connection pool, not counting the listener's
// connection (default 8).
func WithMaxConns(n int) Option {
	return func(o *options) { o.maxConns = n }
}

// WithLogger sets where the listener reports lost connections (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// IdleInTransactionTimeout ends the session of an instance that stops
// talking in the middle of a transaction (unless the URL sets
// idle_in_transaction_session_timeout). An instance cut off by a network
// partition, with no reset to tell PostgreSQL, would otherwise hold its row
// locks until TCP keepalive gave up, which takes hours: the meta row that
// serializes every writer, and the leader lease row that a fenced write
// shares, which no other instance could then take over.
const IdleInTransactionTimeout = 10 * time.Second

// ParseConfig parses url and adds the session settings every connection of
// the store has; the leader elector uses it for its own connection too.
func ParseConfig(url string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if _, set := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(IdleInTransactionTimeout.Milliseconds())
	}
	return cfg, nil
}

// Store is the PostgreSQL store. Compact is sqlstore.Store.Compact.
type Store struct {
	*sqlstore.Store
	listener *listener
	stop     context.CancelFunc
	done     sync.WaitGroup
}

var (
	_ store.Store     = (*Store)(nil)
	_ store.Compacter = (*Store)(nil)
)

// Open connects to the database at url (a postgres:// URL; search_path in
// its query selects the schema), migrates it and starts listening.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := options{poll: DefaultPollInterval, maxConns: 8, log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(o.maxConns)
	db.SetMaxIdleConns(o.maxConns)

	var schema sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres: %w: %w", store.ErrUnavailable, err)
	}
	if !schema.Valid {
		_ = db.Close()
		return nil, errors.New("postgres: no schema to use: the search_path names no existing schema")
	}
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails
	l := &listener{
		cfg:      cfg,
		schema:   schema.String,
		instance: hex.EncodeToString(id[:]),
		notifier: &store.Notifier{},
		log:      o.log.With("schema", schema.String),
	}
	migrations, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s, err := sqlstore.Open(ctx, sqlstore.Config{
		Dialect: sqlstore.Dialect{
			Name:                 "postgres",
			Migrations:           migrations,
			NumberedPlaceholders: true,
			MigrationLock:        fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d, hashtext(current_schema()))`, migrationLockKey),
			ReadTx:               sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
			NowNanos:             NowNanos,
			LockShared:           " FOR SHARE",
			Notify: func(revision int64) (string, []any) {
				return `SELECT pg_notify($1, $2)`, []any{Channel, l.payload(revision)}
			},
			Pipeline: newPipe,
			DiskFull: diskFull,
		},
		Read:     db,
		Write:    db,
		Now:      o.now,
		Notifier: l.notifier,
	})
	if err != nil {
		return nil, err // sqlstore closed db
	}
	conn, err := l.connect(ctx)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("postgres: listen: %w: %w", store.ErrUnavailable, err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ps := &Store{Store: s, listener: l, stop: stop}
	ps.done.Go(func() { l.run(runCtx, conn) })
	if o.poll > 0 {
		ps.done.Go(func() { poll(runCtx, o.poll, l.notifier) })
	}
	return ps, nil
}

// Close closes the store and stops listening.
func (s *Store) Close() error {
	err := s.Store.Close()
	if errors.Is(err, store.ErrClosed) {
		return err
	}
	s.stop()
	s.done.Wait()
	return err
}

// poll wakes waiters every interval: a safety net should a notification
// be lost in a way the listener cannot see.
func poll(ctx context.Context, interval time.Duration, n *store.Notifier) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.Notify()
		}
	}
}

// sqlstateDiskFull is PostgreSQL's disk_full (class 53, insufficient
// resources): the server could not extend a file of the database.
const sqlstateDiskFull = "53100"

// diskFull says whether err is PostgreSQL refusing a write for want of
// disk space (sqlstore.Dialect.DiskFull).
func diskFull(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == sqlstateDiskFull
}
