package leader

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/postgres"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

// Short settings so that the tests take seconds: the leader stops its work
// 200 ms (a fifth) before its lease can expire.
const (
	testLease = time.Second
	testRenew = 200 * time.Millisecond
	testRetry = 50 * time.Millisecond
)

// openStore migrates a fresh schema (the election needs the leases table)
// and returns its URL and the store.
func openStore(t *testing.T) (string, *postgres.Store) {
	t.Helper()
	url := pgtest.URL(t)
	return url, openAt(t, url)
}

// openAt opens the store at url (an instance's own, such as through a
// proxy) and closes it when the test ends.
func openAt(t *testing.T, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), url, postgres.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// counted counts the calls an elector makes of its campaign, so that a test
// can wait for renewals and tries instead of sleeping. Once dead is set, it
// takes no lease any more, as an instance whose process died.
type counted struct {
	Campaign
	acquires, renewals atomic.Int64
	dead               atomic.Bool
}

func (c *counted) Acquire(ctx context.Context, d time.Duration) (store.Fence, store.Fence, error) {
	defer c.acquires.Add(1)
	if c.dead.Load() {
		return store.Fence{}, store.Fence{}, errors.New("this instance is dead")
	}
	return c.Campaign.Acquire(ctx, d)
}

func (c *counted) Renew(ctx context.Context, f store.Fence, d time.Duration) (bool, error) {
	held, err := c.Campaign.Renew(ctx, f, d)
	if held && err == nil {
		c.renewals.Add(1)
	}
	return held, err
}

// term is one period of leadership as the work saw it.
type term struct {
	holder     string
	fence      store.Fence
	start, end time.Time
}

// cluster runs electors and records every term, checking that no two
// overlap.
type cluster struct {
	t          *testing.T
	mu         sync.Mutex
	terms      []term
	leading    atomic.Int32
	maxLeading atomic.Int32
}

// run starts an elector named name on a store of its own at url; stop
// cancels it and waits.
func (c *cluster) run(name, url string) (campaign *counted, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	campaign = &counted{Campaign: openAt(c.t, url).Election(LeaseName, name)}
	e := NewLease(LeaseOptions{Campaign: campaign, Log: quiet(), LeaseDuration: testLease, RenewInterval: testRenew, RetryInterval: testRetry})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx, func(ctx context.Context) {
			n := c.leading.Add(1)
			for m := c.maxLeading.Load(); n > m && !c.maxLeading.CompareAndSwap(m, n); m = c.maxLeading.Load() {
			}
			f, _ := store.FenceFrom(ctx)
			c.mu.Lock()
			i := len(c.terms)
			c.terms = append(c.terms, term{holder: name, fence: f, start: time.Now()})
			c.mu.Unlock()
			<-ctx.Done()
			c.mu.Lock()
			c.terms[i].end = time.Now()
			c.mu.Unlock()
			c.leading.Add(-1)
		})
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	c.t.Cleanup(stop)
	return campaign, stop
}

// waitTerms waits until n terms have started and returns them.
func (c *cluster) waitTerms(n int, within time.Duration) []term {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		c.mu.Lock()
		got := append([]term(nil), c.terms...)
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d terms within %s, want %d: %+v", len(got), within, n, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *cluster) checkOneLeader() {
	c.t.Helper()
	if n := c.maxLeading.Load(); n != 1 {
		c.t.Errorf("%d instances led at once", n)
	}
}

// eventually polls cond until it holds, failing the test after within.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLease_OneLeaderAndHandoverOnStop runs two electors: exactly one leads
// while the other tries to take the lease again and again and the leader
// renews it, the other takes over as soon as the leader stops (it releases
// the lease rather than letting it expire), and the term increases.
func TestLease_OneLeaderAndHandoverOnStop(t *testing.T) {
	url, _ := openStore(t)
	c := &cluster{t: t}
	a, stopA := c.run("a", url)
	c.waitTerms(1, 10*time.Second)
	b, _ := c.run("b", url)
	// Enough tries by b, each refused, and renewals by a, each held, that
	// b would have taken over had any of them gone wrong.
	eventually(t, "b tries 10 times, a renews 5 times", 30*time.Second, func() bool {
		return b.acquires.Load() >= 10 && a.renewals.Load() >= 5
	})
	c.checkOneLeader()
	if got := c.waitTerms(1, 0); len(got) != 1 || !got[0].end.IsZero() {
		t.Fatalf("a lost the lease while renewing it: %+v", got)
	}
	stopA() // returns once a released the lease
	tries := b.acquires.Load()
	terms := c.waitTerms(2, 10*time.Second)
	// Counted in b's tries, not in time, so that a slow machine does not
	// fail it: a released lease is taken within b's next few tries (one
	// may be under way as a releases, and a's session lock may outlive
	// the release by a try), where a lease left to expire, with at least
	// 800 ms of its second left, would take 16 tries at 50 ms. A leader
	// does not try again, so the count stops at the takeover.
	if n := b.acquires.Load() - tries; n > 5 {
		t.Errorf("b took over at try %d after a stopped; a released lease should be taken within a few", n)
	}
	want := []store.Fence{{Lease: LeaseName, Holder: "a", Term: 1}, {Lease: LeaseName, Holder: "b", Term: 2}}
	if diff := cmp.Diff(want, []store.Fence{terms[0].fence, terms[1].fence}); diff != "" {
		t.Errorf("fences of the terms (-want +got):\n%s", diff)
	}
	if terms[1].start.Before(terms[0].end) {
		t.Errorf("b started leading at %s, before a stopped at %s", terms[1].start, terms[0].end)
	}
	c.checkOneLeader()
}

// TestLease_HandoverWhenConnectionCut cuts the leader off from PostgreSQL
// with a proxy, which closes its connections: PostgreSQL ends its sessions,
// so the leader stops its work at once (its session ended) and the other
// instance takes over at its next try, long before the lease expires.
func TestLease_HandoverWhenConnectionCut(t *testing.T) {
	url, _ := openStore(t)
	proxy := pgtest.StartProxy(t, url)
	c := &cluster{t: t}
	c.run("a", proxy.URL)
	c.waitTerms(1, 10*time.Second)
	b, _ := c.run("b", url)
	eventually(t, "b tries", 10*time.Second, func() bool { return b.acquires.Load() >= 2 })
	cut := time.Now()
	proxy.Cut()
	terms := c.waitTerms(2, 10*time.Second)
	a, bt := terms[0], terms[1]
	if a.holder != "a" || bt.holder != "b" || bt.fence.Term != a.fence.Term+1 {
		t.Fatalf("terms %+v, want a then b with the next term", terms)
	}
	eventually(t, "a stops", 10*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.terms[0].end.IsZero()
	})
	c.mu.Lock()
	a = c.terms[0]
	c.mu.Unlock()
	t.Logf("a stopped %s after the cut; b led %s after the cut", a.end.Sub(cut), bt.start.Sub(cut))
	// Neither waits for the lease (1 s) to run out: a sees its session
	// end, b finds no session holding the lease. (b may start before a has
	// stopped: a's writes are fenced from b's takeover on, see
	// TestLease_DeposedLeaderIsFenced.)
	if d := a.end.Sub(cut); d > testLease/2 {
		t.Errorf("a stopped %s after the cut, want well within its lease (%s)", d, testLease)
	}
	if d := bt.start.Sub(cut); d > testLease/2 {
		t.Errorf("b took over %s after the cut, want well within the lease (%s)", d, testLease)
	}
}

// TestLease_TakeoverWhenLeaderSessionEnds plays the leader's death: the
// leader takes no lease any more, and its session ends from the database
// side (pg_terminate_backend, what PostgreSQL does when the leader's
// process dies). The other instance takes over at its next try, though the
// lease has most of its time left.
func TestLease_TakeoverWhenLeaderSessionEnds(t *testing.T) {
	url, st := openStore(t)
	c := &cluster{t: t}
	a, _ := c.run("a", url)
	c.waitTerms(1, 10*time.Second)
	c.run("b", url)
	a.dead.Store(true)
	db, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(t.Context())
	// The session holding the election's lock is a's election session.
	var n int
	// Only this test's election: other tests (and other packages' tests)
	// elect in other schemas of the same database at the same time.
	err = db.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = $1
		AND objid::bigint = (hashtext(current_schema() || '/' || $2)::bigint & 4294967295)`,
		postgres.ElectionLockKey, LeaseName).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminated %d sessions holding the election lock, %v; want 1", n, err)
	}
	ended := time.Now()
	terms := c.waitTerms(2, 10*time.Second)
	if terms[1].holder != "b" || terms[1].fence.Term != 2 {
		t.Fatalf("terms %+v, want b's term 2 second", terms)
	}
	if d := terms[1].start.Sub(ended); d > testLease/2 {
		t.Errorf("b took over %s after a's session ended, want at its next try (%s), not the lease's end (%s)", d, testRetry, testLease)
	}
	ls, err := st.Leases(t.Context(), LeaseName)
	if err != nil || len(ls) != 1 {
		t.Fatalf("leases %v, %v", ls, err)
	}
	if f, err := store.ParseFence(ls[0]); err != nil || f.Holder != "b" {
		t.Errorf("the lease holds %+v, %v; want b", f, err)
	}
}

// TestLease_DeposedLeaderIsFenced shows fencing: a leader cut off from the
// database is replaced, and a status write under its old fence (one it had
// in flight when it was deposed) is rejected with ErrFenced and changes
// nothing, while the new leader's writes go through.
func TestLease_DeposedLeaderIsFenced(t *testing.T) {
	url, st := openStore(t)
	ctx := t.Context()
	svc, err := store.Create(ctx, st, &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "web", Spec: &resource.MeshServiceSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	proxy := pgtest.StartProxy(t, url)
	c := &cluster{t: t}
	c.run("a", proxy.URL)
	old := c.waitTerms(1, 10*time.Second)[0].fence
	c.run("b", url)
	proxy.Cut()
	cur := c.waitTerms(2, 10*time.Second)[1].fence

	write := func(f store.Fence, ip string) error {
		upd := svc.Clone()
		upd.Status = &resource.ServiceStatus{VIPs: []resource.VIP{{IP: ip, Type: resource.VIPKuma}}}
		rs, err := st.Apply(store.WithFence(ctx, f), store.Op{Type: store.OpUpdateStatus, Object: upd},
			store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: "vip/" + ip, Value: []byte("web")}})
		if err == nil {
			err = errors.Join(rs[0].Err, rs[1].Err)
		}
		return err
	}
	if err := write(old, "241.0.0.1"); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("status write of the deposed leader (term %d) = %v, want ErrFenced", old.Term, err)
	}
	got, err := st.Get(ctx, svc.Key())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(svc, got); diff != "" {
		t.Errorf("the rejected write changed the service (-before +after):\n%s", diff)
	}
	if ls, err := st.Leases(ctx, "vip/"); err != nil || len(ls) != 0 {
		t.Errorf("the rejected write left leases %v, %v", ls, err)
	}
	if err := write(cur, "241.0.0.2"); err != nil {
		t.Errorf("status write of the new leader (term %d) = %v", cur.Term, err)
	}
}
