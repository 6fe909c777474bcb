package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/store"
)

// Defaults of LeaseOptions.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewInterval = 5 * time.Second
	DefaultRetryInterval = time.Second
)

// Campaign is this instance's part in the election of one fenced lease,
// implemented by the PostgreSQL store (postgres.Store.Election): the lease
// row, timed by the database's clock, and a session of the campaign's own
// that stands for the holder being alive. Its methods are called from one
// goroutine.
type Campaign interface {
	// Holder is this instance's identity as a lease holder.
	Holder() string
	// Acquire takes the lease for d when it is free, expired, or its
	// holder's session has ended, and returns the new term's fence and
	// the fence it took over from (zero when the lease was free).
	// Otherwise it returns a zero fence and the current holder's.
	Acquire(ctx context.Context, d time.Duration) (taken, previous store.Fence, err error)
	// Renew extends the lease of f to d from now; false when it is no
	// longer f's. An error ends the term.
	Renew(ctx context.Context, f store.Fence, d time.Duration) (bool, error)
	// Watch returns nil when ctx ends, or an error as soon as the
	// session that holds the lease ends, which ends the term.
	Watch(ctx context.Context) error
	// Release expires the lease of f at once and ends the term.
	Release(ctx context.Context, f store.Fence) error
	// Close ends the session, and any term with it.
	Close()
}

// LeaseOptions configures a Lease elector.
type LeaseOptions struct {
	// Campaign is the election this instance takes part in; its Holder
	// must be unique among the instances (NewHolderID makes one).
	Campaign Campaign
	Log      *slog.Logger
	// LeaseDuration is how long the lease lasts after each renewal, by
	// the database's clock: how long the instances wait for a leader that
	// went silent while its session looks alive to the database (a frozen
	// process, a network partition). A leader whose process dies, or
	// whose connection breaks, is replaced at the next RetryInterval.
	LeaseDuration time.Duration
	// RenewInterval is how often the leader renews; RetryInterval how
	// often a follower tries to take the lease.
	RenewInterval, RetryInterval time.Duration
	// Registerer receives the elector's metrics; nil for none.
	Registerer prometheus.Registerer
}

// Lease elects one leader among the instances sharing a PostgreSQL schema
// with the row LeaseName of the leases table, holding the holder and term
// (store.Fence.LeaseValue) and an expiry by the database's clock, so that
// the instances' clocks do not matter, and with the session of the
// leader's Campaign, which PostgreSQL ends when the leader's process dies.
//
// A follower tries every RetryInterval to take the lease: it succeeds when
// there is none, when it has expired, or when the leader's session has
// ended, and then raises the term by one. Every take is a transaction that
// locks the row (FOR UPDATE), so two instances cannot both take it, and a
// takeover waits for fenced writes in flight (which lock it FOR SHARE).
//
// The leader renews every RenewInterval, pushing the expiry to the
// database's now plus LeaseDuration. It stops its work, and its term ends,
// as soon as its session ends (Watch) or a renewal fails or finds the
// lease taken: another instance may take over at once, and writes fenced
// with the old term fail from then on. It also stops when a fifth of
// LeaseDuration is left of the lease as measured by this process's
// monotonic clock from the start of the last successful renewal (the
// safety margin), so that its work has ended before the lease can expire.
// When its context ends (shutdown) or its work returns, the leader
// releases the lease so that another instance takes over at its next try.
type Lease struct {
	o      LeaseOptions
	margin time.Duration

	mu      sync.Mutex
	leading bool

	isLeader      prometheus.Gauge
	term          prometheus.Gauge
	changes       *prometheus.CounterVec
	renewFailures prometheus.Counter
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
			Help: "Changes of this instance's leadership: acquired, released (shutdown), lost (the session ended, a renewal failed or another instance holds the lease) or expired (no renewal succeeded until the safety margin).",
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
func (l *Lease) Self() string { return l.o.Campaign.Holder() }

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
	defer l.o.Campaign.Close()
	lastHolder := ""
	for ctx.Err() == nil {
		start := time.Now()
		fence, cur, err := l.acquire(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			l.o.Log.Warn("leader election: cannot reach the database; will retry", "err", err)
		case err == nil && fence.Term != 0:
			if cur.Holder != "" {
				l.o.Log.Info("leader election: took over the lease; its holder's session had ended", "holder", cur.Holder, "term", cur.Term)
			}
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

func (l *Lease) acquire(ctx context.Context) (taken, previous store.Fence, err error) {
	ctx, cancel := context.WithTimeout(ctx, l.o.LeaseDuration)
	defer cancel()
	return l.o.Campaign.Acquire(ctx, l.o.LeaseDuration)
}

// hold runs lead while the lease is renewed and the session lives.
// acquired is when the transaction that took the lease started.
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
	renewAt := acquired.Add(l.o.RenewInterval)
	for {
		// Between renewals, watch the session: when it ends, another
		// instance may take over at once.
		wake := renewAt
		if stopBy.Before(wake) {
			wake = stopBy
		}
		err := l.watch(ctx, done, wake)
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
		default:
		}
		switch {
		case err != nil:
			l.o.Log.Error("leader election: the session that holds the lease ended; stopping the controllers", "term", fence.Term, "err", err)
			stepDown("lost")
			l.o.Campaign.Close()
			return
		case !time.Now().Before(stopBy):
			l.o.Log.Error("leader election: could not renew the lease in time; stopping the controllers before it expires", "term", fence.Term)
			stepDown("expired")
			l.o.Campaign.Close()
			return
		}
		start := time.Now()
		held, err := l.renew(ctx, fence, stopBy)
		switch {
		case err != nil && ctx.Err() != nil:
			continue // the next round releases
		case err != nil:
			l.renewFailures.Inc()
			l.o.Log.Error("leader election: renewing the lease failed; stopping the controllers", "term", fence.Term, "err", err)
			stepDown("lost")
			l.o.Campaign.Close()
			return
		case !held:
			l.o.Log.Error("leader election: the lease was lost; stopping the controllers", "term", fence.Term)
			stepDown("lost")
			l.o.Campaign.Close()
			return
		}
		stopBy = start.Add(l.o.LeaseDuration - l.margin)
		renewAt = start.Add(l.o.RenewInterval)
	}
}

// watch watches the session until wake, ctx's end or done, whichever comes
// first, and returns an error if the session ended.
func (l *Lease) watch(ctx context.Context, done <-chan struct{}, wake time.Time) error {
	wctx, cancel := context.WithDeadline(ctx, wake)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-wctx.Done():
		}
	}()
	return l.o.Campaign.Watch(wctx)
}

// renew extends the lease held by fence. It gives up at by, or after
// RenewInterval, whichever comes first.
func (l *Lease) renew(ctx context.Context, fence store.Fence, by time.Time) (bool, error) {
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	ctx, cancel2 := context.WithTimeout(ctx, l.o.RenewInterval)
	defer cancel2()
	return l.o.Campaign.Renew(ctx, fence, l.o.LeaseDuration)
}

// release expires the lease held by fence, if it still is, so that another
// instance need not wait for the expiry. It is best effort: on failure the
// session's end frees the lease for the others.
func (l *Lease) release(fence store.Fence) {
	ctx, cancel := context.WithTimeout(context.Background(), min(l.o.RetryInterval, 2*time.Second))
	defer cancel()
	if err := l.o.Campaign.Release(ctx, fence); err != nil {
		l.o.Log.Warn("leader election: could not release the lease; its session's end frees it", "err", err)
		return
	}
	l.o.Log.Info("leader election: released the lease", "term", fence.Term)
}
