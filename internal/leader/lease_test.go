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

// openStore migrates a fresh schema (the elector needs the leases table)
// and returns its URL and the store.
func openStore(t *testing.T) (string, *postgres.Store) {
	t.Helper()
	url := pgtest.URL(t)
	st, err := postgres.Open(t.Context(), url, postgres.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return url, st
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

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

// run starts an elector named name on url; stop cancels it and waits.
func (c *cluster) run(name, url string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	e := NewLease(LeaseOptions{URL: url, Holder: name, Log: quiet(), LeaseDuration: testLease, RenewInterval: testRenew, RetryInterval: testRetry})
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
	return stop
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

// TestLease_OneLeaderAndHandoverOnStop runs two electors: exactly one leads
// at a time, the other takes over as soon as the leader stops (it releases
// the lease rather than letting it expire), and the term increases.
func TestLease_OneLeaderAndHandoverOnStop(t *testing.T) {
	url, _ := openStore(t)
	c := &cluster{t: t}
	stopA := c.run("a", url)
	c.waitTerms(1, 10*time.Second)
	c.run("b", url)
	time.Sleep(3 * testLease) // b tries many times; a renews many times
	c.checkOneLeader()
	if got := c.waitTerms(1, 0); len(got) != 1 || !got[0].end.IsZero() {
		t.Fatalf("a lost the lease while renewing it: %+v", got)
	}
	stopped := time.Now()
	stopA()
	terms := c.waitTerms(2, 10*time.Second)
	if d := terms[1].start.Sub(stopped); d > testLease/2 {
		t.Errorf("b took over %s after a stopped; a released lease should be taken at the next try (%s)", d, testRetry)
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
// with a proxy: it must stop its work before its lease can expire, and the
// other instance takes over once the lease has expired, not before.
func TestLease_HandoverWhenConnectionCut(t *testing.T) {
	url, _ := openStore(t)
	proxy := pgtest.StartProxy(t, url)
	c := &cluster{t: t}
	c.run("a", proxy.URL)
	c.waitTerms(1, 10*time.Second)
	c.run("b", url)
	time.Sleep(2 * testLease)
	cut := time.Now()
	proxy.Cut()
	terms := c.waitTerms(2, 10*time.Second)
	a, b := terms[0], terms[1]
	if a.holder != "a" || b.holder != "b" || b.fence.Term != a.fence.Term+1 {
		t.Fatalf("terms %+v, want a then b with the next term", terms)
	}
	// a's last renewal started before the cut; its lease expires no later
	// than a lease duration after the cut, and no earlier than the safety
	// margin after it stopped.
	if a.end.IsZero() || a.end.After(cut.Add(testLease)) {
		t.Errorf("a stopped %s after the cut, later than its lease (%s)", a.end.Sub(cut), testLease)
	}
	if gap := b.start.Sub(a.end); gap < 0 {
		t.Errorf("b started %s before a stopped", -gap)
	} else {
		t.Logf("a stopped %s after the cut; b led %s after that, %s after the cut", a.end.Sub(cut), gap, b.start.Sub(cut))
	}
	if d := b.start.Sub(cut); d > testLease+time.Second {
		t.Errorf("b took over %s after the cut, want within the lease (%s) and a second", d, testLease)
	}
	c.checkOneLeader()
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
