package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/postgres"
)

// Defaults of LeaseOptions.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewInterval = 5 * time.Second
	DefaultRetryInterval = time.Second
)

// LeaseOptions configures a Lease elector.
type LeaseOptions struct {
	// URL is the PostgreSQL URL of the store; its search_path selects the
	// schema whose leases table holds the lease.
	URL string
	// Holder identifies this instance; NewLease makes one up (host, pid
	// and a random suffix) when empty. It must be unique among the
	// instances.
	Holder string
	Log    *slog.Logger
	// LeaseDuration is how long the lease lasts after each renewal, by
	// the database's clock: how long the instances wait for a silent
	// leader before one takes over.
	LeaseDuration time.Duration
	// RenewInterval is how often the leader renews; RetryInterval how
	// often a follower tries to take the lease, and a leader whose renewal
	// failed tries again.
	RenewInterval, RetryInterval time.Duration
	// Registerer receives the elector's metrics; nil for none.
	Registerer prometheus.Registerer
}

// Lease elects one leader among the instances sharing a PostgreSQL schema
// with the row LeaseName of the leases table, holding the holder and term
// (store.Fence.LeaseValue) and an expiry in Unix nanoseconds by the
// database's clock, so that the instances' clocks do not matter.
//
// A follower tries every RetryInterval to take the lease: it succeeds when
// there is none, or when it has expired, and then raises the term by one.
// Every take is a transaction that locks the row (FOR UPDATE), so two
// instances cannot both take it, and a takeover waits for fenced writes in
// flight (which lock it FOR SHARE).
//
// The leader renews every RenewInterval, pushing the expiry to the
// database's now plus LeaseDuration; a renewal that fails is retried every
// RetryInterval. The expiry can be no earlier than the start of the last
// successful renewal plus LeaseDuration, as measured by this process's
// monotonic clock; the leader stops its work when a fifth of LeaseDuration
// is left of that (the safety margin), so that its work has ended before
// another instance can take over, and writes fenced with its term fail
// from then on anyway. When its context ends (shutdown) or its work
// returns, the leader releases the lease so that another instance takes
// over at its next try rather than after the expiry.
//
// The elector uses a connection of its own, outside the store's pool, so
// that a busy pool cannot delay renewals.
type Lease struct {
	o      LeaseOptions
	margin time.Duration

	mu      sync.Mutex
	leading bool

	isLeader      prometheus.Gauge
	term          prometheus.Gauge
	changes       *prometheus.CounterVec
	renewFailures prometheus.Counter

	conn *pgx.Conn // owned by Run's goroutine
}

var _ Elector = (*Lease)(nil)

// NewLease returns an elector; it does no I/O.
func NewLease(o LeaseOptions) *Lease {
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval <= 0 {
		o.RenewInterval = DefaultRenewInterval
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.Holder == "" {
		o.Holder = NewHolderID("")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	l := &Lease{
		o:      o,
		margin: o.LeaseDuration / 5,
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_leader_is_leader", Help: "1 while this instance leads and runs the controllers, else 0.",
		}),
		term: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_leader_term", Help: "The term of the leader lease this instance last held or saw.",
		}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_leader_changes_total",
			Help: "Changes of this instance's leadership: acquired, released (shutdown), lost (another instance holds the lease) or expired (renewals failed until the safety margin).",
		}, []string{"change"}),
		renewFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshnames_leader_renew_failures_total", Help: "Renewals of the leader lease that failed (database unreachable or slow).",
		}),
	}
	for _, c := range []string{"acquired", "released", "lost", "expired"} {
		l.changes.WithLabelValues(c)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(l.isLeader, l.term, l.changes, l.renewFailures)
	}
	return l
}

// NewHolderID returns a holder identity unique to this process: the host
// name, the given detail (such as the API address) when not empty, the pid
// and a random suffix.
func NewHolderID(detail string) string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown"
	}
	var b [3]byte
	_, _ = rand.Read(b[:]) // never fails
	if detail != "" {
		host += "/" + detail
	}
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Self returns the holder identity of this instance.
func (l *Lease) Self() string { return l.o.Holder }

// Leading reports whether this instance leads (its work is running).
func (l *Lease) Leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

func (l *Lease) setLeading(v bool, term int64) {
	l.mu.Lock()
	l.leading = v
	l.mu.Unlock()
	l.isLeader.Set(map[bool]float64{false: 0, true: 1}[v])
	l.term.Set(float64(term))
}

// Run implements Elector.
func (l *Lease) Run(ctx context.Context, lead func(ctx context.Context)) error {
	defer l.closeConn()
	lastHolder := ""
	for ctx.Err() == nil {
		start := time.Now()
		fence, cur, err := l.acquire(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			l.o.Log.Warn("leader election: cannot reach the database; will retry", "err", err)
		case err == nil && fence.Term != 0:
			l.hold(ctx, fence, start, lead)
			lastHolder = ""
		case err == nil && cur.Holder != lastHolder:
			l.o.Log.Info("leader election: another instance leads", "holder", cur.Holder, "term", cur.Term)
			l.term.Set(float64(cur.Term))
			lastHolder = cur.Holder
		}
		select {
		case <-ctx.Done():
		case <-time.After(l.o.RetryInterval):
		}
	}
	return nil
}

// The lease's SQL. $1 is the lease name, $2 its value, $3 the duration in
// nanoseconds; expiries are Unix nanoseconds by the database's clock.
const (
	selectLease = `SELECT value, expires_at, ` + postgres.NowNanos + ` FROM leases WHERE name = $1 FOR UPDATE`
	insertLease = `INSERT INTO leases (name, value, expires_at) VALUES ($1, $2, ` + postgres.NowNanos + ` + $3)
		ON CONFLICT (name) DO NOTHING`
	takeLease  = `UPDATE leases SET value = $2, expires_at = ` + postgres.NowNanos + ` + $3 WHERE name = $1`
	renewLease = `UPDATE leases SET expires_at = ` + postgres.NowNanos + ` + $3
		WHERE name = $1 AND value = $2 AND expires_at > ` + postgres.NowNanos
	// releaseLease expires the lease now, so that it is free at once.
	releaseLease = `UPDATE leases SET expires_at = ` + postgres.NowNanos + ` WHERE name = $1 AND value = $2`
)

// acquire tries to take the lease. It returns the fence of the term it
// took, or a zero fence and the current holder's when another instance
// holds a lease that has not expired.
func (l *Lease) acquire(ctx context.Context) (store.Fence, store.Fence, error) {
	ctx, cancel := context.WithTimeout(ctx, l.o.LeaseDuration)
	defer cancel()
	conn, err := l.connect(ctx)
	if err != nil {
		return store.Fence{}, store.Fence{}, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return store.Fence{}, store.Fence{}, l.connErr(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	var value []byte
	var expires, now int64
	err = tx.QueryRow(ctx, selectLease, LeaseName).Scan(&value, &expires, &now)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.Fence{}, store.Fence{}, l.connErr(err)
	}
	exists := err == nil
	var cur store.Fence
	if exists {
		// An unreadable value counts as term 0: whoever takes it starts at 1.
		cur, _ = store.ParseFence(store.Lease{Name: LeaseName, Value: value})
		if (expires == 0 || expires > now) && cur.Holder != l.o.Holder {
			return store.Fence{}, cur, tx.Commit(ctx)
		}
	}
	next := store.Fence{Lease: LeaseName, Holder: l.o.Holder, Term: cur.Term + 1}
	query := takeLease
	if !exists {
		query = insertLease
	}
	tag, err := tx.Exec(ctx, query, LeaseName, next.LeaseValue(), l.o.LeaseDuration.Nanoseconds())
	if err != nil {
		return store.Fence{}, store.Fence{}, l.connErr(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return store.Fence{}, store.Fence{}, l.connErr(err)
	}
	if tag.RowsAffected() != 1 {
		return store.Fence{}, cur, nil // another instance inserted it first
	}
	return next, store.Fence{}, nil
}

// hold runs lead while the lease is renewed. acquired is when the
// transaction that took the lease started.
func (l *Lease) hold(ctx context.Context, fence store.Fence, acquired time.Time, lead func(ctx context.Context)) {
	l.o.Log.Info("leader election: this instance leads", "term", fence.Term)
	l.changes.WithLabelValues("acquired").Inc()
	l.setLeading(true, fence.Term)
	lctx, stop := context.WithCancel(store.WithFence(ctx, fence))
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx)
	}()
	stepDown := func(change string) {
		stop()
		<-done
		l.setLeading(false, fence.Term)
		l.changes.WithLabelValues(change).Inc()
	}
	// stopBy is when the work must have been told to stop: the lease
	// expires no earlier than a renewal's start plus LeaseDuration.
	stopBy := acquired.Add(l.o.LeaseDuration - l.margin)
	deadline := time.NewTimer(time.Until(stopBy))
	defer deadline.Stop()
	renew := time.NewTimer(time.Until(acquired.Add(l.o.RenewInterval)))
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			stepDown("released")
			l.release(fence)
			return
		case <-done:
			l.o.Log.Warn("leader election: the leader's work ended; releasing the lease")
			stepDown("released")
			l.release(fence)
			return
		case <-deadline.C:
			l.o.Log.Error("leader election: could not renew the lease in time; stopping the controllers before it expires", "term", fence.Term)
			stepDown("expired")
			return
		case <-renew.C:
			start := time.Now()
			held, err := l.renew(ctx, fence, stopBy)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					continue // the next loop releases
				}
				l.renewFailures.Inc()
				l.o.Log.Warn("leader election: renewing the lease failed; will retry", "term", fence.Term, "err", err)
				renew.Reset(l.o.RetryInterval)
			case !held:
				l.o.Log.Error("leader election: the lease was lost; stopping the controllers", "term", fence.Term)
				stepDown("lost")
				return
			default:
				stopBy = start.Add(l.o.LeaseDuration - l.margin)
				deadline.Reset(time.Until(stopBy))
				renew.Reset(time.Until(start.Add(l.o.RenewInterval)))
			}
		}
	}
}

// renew extends the lease held by fence. It reports false when the lease
// is no longer ours (taken or expired). It gives up at by, or after
// RenewInterval, whichever comes first.
func (l *Lease) renew(ctx context.Context, fence store.Fence, by time.Time) (bool, error) {
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	ctx, cancel2 := context.WithTimeout(ctx, l.o.RenewInterval)
	defer cancel2()
	conn, err := l.connect(ctx)
	if err != nil {
		return false, err
	}
	tag, err := conn.Exec(ctx, renewLease, LeaseName, fence.LeaseValue(), l.o.LeaseDuration.Nanoseconds())
	if err != nil {
		return false, l.connErr(err)
	}
	return tag.RowsAffected() == 1, nil
}

// release expires the lease held by fence, if it still is, so that another
// instance need not wait for the expiry. It is best effort: on failure the
// lease expires on its own.
func (l *Lease) release(fence store.Fence) {
	ctx, cancel := context.WithTimeout(context.Background(), min(l.o.RetryInterval, 2*time.Second))
	defer cancel()
	conn, err := l.connect(ctx)
	if err == nil {
		_, err = conn.Exec(ctx, releaseLease, LeaseName, fence.LeaseValue())
		err = l.connErr(err)
	}
	if err != nil {
		l.o.Log.Warn("leader election: could not release the lease; it expires on its own", "err", err)
		return
	}
	l.o.Log.Info("leader election: released the lease", "term", fence.Term)
}

// connect returns the elector's connection, opening it when needed.
func (l *Lease) connect(ctx context.Context) (*pgx.Conn, error) {
	if l.conn != nil && !l.conn.IsClosed() {
		return l.conn, nil
	}
	l.closeConn()
	cfg, err := postgres.ParseConfig(l.o.URL)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	l.conn = conn
	return conn, nil
}

// connErr passes err on, dropping the connection when it failed: after a
// timeout or a network error its state is unknown.
func (l *Lease) connErr(err error) error {
	if err != nil {
		l.closeConn()
	}
	return err
}

func (l *Lease) closeConn() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.conn.Close(ctx)
		l.conn = nil
	}
}
