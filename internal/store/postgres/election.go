package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/meshnames/meshnames/internal/store"
)

// ElectionLockKey is the first key of the session advisory lock that stands
// for a leader's liveness; the second is a hash of the schema and the lease
// name, so that schemas and leases elect independently. The leader's
// session is the one holding it: in pg_locks, locktype 'advisory' with this
// classid.
const ElectionLockKey = 0x6d6e7332 // "mns2", 1835889458

// Election is one instance's part in electing the holder of a fenced lease
// (store.Fence) among the instances sharing the schema: the lease row in
// the leases table, timed by the database's clock, and a session of its
// own, outside the store's pool, so that a busy pool cannot delay a
// renewal.
//
// The holder of a term holds, on that session, an advisory lock keyed by
// the schema and the lease, from before the transaction that takes the
// lease commits until the term ends; then the session is closed. The lock
// is what the others see of the holder being alive: PostgreSQL releases it
// the moment the holder's session ends - the process died, even by
// SIGKILL, or its connection broke - and another instance may then take the
// lease before it expires. The expiry remains for a holder whose session
// PostgreSQL still believes alive (a frozen process, a partition that sent
// no reset): the session also has idle_session_timeout set to the lease
// duration, so that a session silent for that long ends too.
//
// Taking over early gives up nothing of fencing: the old holder's writes,
// checked against the lease row in their own transactions, fail from the
// takeover on, and a takeover waits for writes in flight. The old holder,
// when it is alive, sees its session end (Watch) and stops its work.
//
// An Election is used by one goroutine at a time.
type Election struct {
	cfg    *pgx.ConnConfig
	name   string
	holder string
	conn   *pgx.Conn
}

// Election returns this instance's part in the election of the lease
// name, as holder (unique among the instances). It does no I/O.
func (s *Store) Election(name, holder string) *Election {
	return &Election{cfg: s.listener.cfg, name: name, holder: holder}
}

// Holder returns the holder identity of this instance.
func (e *Election) Holder() string { return e.holder }

// The election's SQL. $1 is the lease name; expiries are Unix nanoseconds
// by the database's clock (NowNanos), $3 a duration in nanoseconds.
const (
	electionLock    = `SELECT pg_try_advisory_lock($2::int, hashtext(current_schema() || '/' || $1))`
	selectLease     = `SELECT value, expires_at, ` + NowNanos + ` FROM leases WHERE name = $1 FOR UPDATE`
	insertLease     = `INSERT INTO leases (name, value, expires_at) VALUES ($1, $2, ` + NowNanos + ` + $3) ON CONFLICT (name) DO NOTHING`
	takeLease       = `UPDATE leases SET value = $2, expires_at = ` + NowNanos + ` + $3 WHERE name = $1`
	renewLease      = `UPDATE leases SET expires_at = ` + NowNanos + ` + $3 WHERE name = $1 AND value = $2 AND expires_at > ` + NowNanos
	releaseLease    = `UPDATE leases SET expires_at = ` + NowNanos + ` WHERE name = $1 AND value = $2`
	releaseSessions = `SELECT pg_advisory_unlock_all()`
)

// Acquire tries to take the lease for d. It takes it when there is none,
// when it has expired, or when its holder's session has ended (no session
// holds the lock), and returns the fence of the new term (the previous
// term plus one) and the previous holder's fence (zero when there was
// none). Otherwise it returns a zero fence and the current holder's.
//
// On success the election's session holds the lock until Release, Close or
// a failure of the session, which end the term.
func (e *Election) Acquire(ctx context.Context, d time.Duration) (taken, previous store.Fence, err error) {
	conn, err := e.connect(ctx, d)
	if err != nil {
		return store.Fence{}, store.Fence{}, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return store.Fence{}, store.Fence{}, e.fail(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	var value []byte
	var expires, now int64
	err = tx.QueryRow(ctx, selectLease, e.name).Scan(&value, &expires, &now)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.Fence{}, store.Fence{}, e.fail(err)
	}
	exists := err == nil
	var cur store.Fence
	if exists {
		// An unreadable value counts as term 0: whoever takes it starts at 1.
		cur, _ = store.ParseFence(store.Lease{Name: e.name, Value: value})
	}
	// Under the row lock (or, without a row, the lock itself decides): a
	// session holding the lock is the live holder's, or a holder's that is
	// still ending its term.
	var locked bool
	if err := tx.QueryRow(ctx, electionLock, e.name, ElectionLockKey).Scan(&locked); err != nil {
		return store.Fence{}, store.Fence{}, e.fail(err)
	}
	if !locked {
		return store.Fence{}, cur, e.fail(tx.Commit(ctx))
	}
	next := store.Fence{Lease: e.name, Holder: e.holder, Term: cur.Term + 1}
	query := takeLease
	if !exists {
		query = insertLease
	}
	tag, err := tx.Exec(ctx, query, e.name, next.LeaseValue(), d.Nanoseconds())
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return store.Fence{}, store.Fence{}, e.fail(err)
	}
	if tag.RowsAffected() != 1 {
		// Another instance inserted the row first; it cannot have held
		// the lock, but whatever happened, this session must not keep it.
		e.Close()
		return store.Fence{}, cur, nil
	}
	if !exists || (expires != 0 && expires <= now) || cur.Holder == e.holder {
		cur = store.Fence{} // nobody held it: nothing was taken over
	}
	return next, cur, nil
}

// Renew extends the lease held by f to d from now. It reports false when
// the lease is no longer f's (taken or expired). A failure ends the
// session, and so the term: the caller must stop leading.
func (e *Election) Renew(ctx context.Context, f store.Fence, d time.Duration) (bool, error) {
	if e.conn == nil || e.conn.IsClosed() {
		return false, errors.New("renew: the election's session has ended")
	}
	tag, err := e.conn.Exec(ctx, renewLease, e.name, f.LeaseValue(), d.Nanoseconds())
	if err != nil {
		return false, e.fail(err)
	}
	return tag.RowsAffected() == 1, nil
}

// Watch blocks until ctx ends, and returns nil then, or until the session
// that holds the lock ends (the connection broke or the database closed
// it), and returns why. After an error the term is over: another instance
// may already have taken the lease.
func (e *Election) Watch(ctx context.Context) error {
	if e.conn == nil || e.conn.IsClosed() {
		return errors.New("the election's session has ended")
	}
	for {
		// No notification ever comes (the session listens to none): the
		// wait ends with ctx, or with the connection.
		_, err := e.conn.WaitForNotification(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return e.fail(err)
		}
	}
}

// Release ends the term of f: it expires the lease now and releases the
// lock, in one transaction, so that the next instance to try takes it, and
// closes the session. It is best effort: if it fails, the session's end
// frees the lease for the others all the same.
func (e *Election) Release(ctx context.Context, f store.Fence) error {
	defer e.Close()
	if e.conn == nil || e.conn.IsClosed() {
		return errors.New("release: the election's session has ended")
	}
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, releaseLease, e.name, f.LeaseValue()); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, releaseSessions); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Close ends the session, and with it any term it held.
func (e *Election) Close() {
	if e.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.conn.Close(ctx)
		e.conn = nil
	}
}

// connect returns the session, opening it when needed. idle_session_timeout
// (PostgreSQL 14 and later; older servers ignore the setting here) ends a
// session silent for longer than a lease lasts.
func (e *Election) connect(ctx context.Context, d time.Duration) (*pgx.Conn, error) {
	if e.conn != nil && !e.conn.IsClosed() {
		return e.conn, nil
	}
	e.Close()
	conn, err := pgx.ConnectConfig(ctx, e.cfg.Copy())
	if err != nil {
		return nil, err
	}
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	if version >= 140000 {
		if _, err := conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = %d", max(d.Milliseconds(), 1000))); err != nil {
			_ = conn.Close(ctx)
			return nil, err
		}
	}
	e.conn = conn
	return conn, nil
}

// fail passes err on, closing the session when there is one: after a
// failure its state is unknown, and a session that may hold the lock must
// not outlive the term.
func (e *Election) fail(err error) error {
	if err != nil {
		e.Close()
	}
	return err
}
