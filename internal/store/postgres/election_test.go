package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

const electionLease = "leader"

// election returns holder's part in the election of electionLease on s,
// closed when t ends.
func election(t *testing.T, s *Store, holder string) *Election {
	t.Helper()
	e := s.Election(electionLease, holder)
	t.Cleanup(e.Close)
	return e
}

// connect opens a connection of the test's own to url.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func acquire(t *testing.T, e *Election, d time.Duration) (store.Fence, store.Fence) {
	t.Helper()
	taken, prev, err := e.Acquire(t.Context(), d)
	if err != nil {
		t.Fatalf("%s: Acquire = %v", e.Holder(), err)
	}
	return taken, prev
}

// acquireOnceFree tries Acquire until it takes the lease: a
// closed session's backend releases its locks a moment after the client
// has gone.
func acquireOnceFree(t *testing.T, e *Election, d time.Duration) (store.Fence, store.Fence) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		taken, prev := acquire(t, e, d)
		if taken.Term != 0 || time.Now().After(deadline) {
			return taken, prev
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func fence(holder string, term int64) store.Fence {
	return store.Fence{Lease: electionLease, Holder: holder, Term: term}
}

// TestElection_Acquire goes through the cases of Acquire on one schema: a
// free lease is taken; a live holder keeps it, even past its expiry (its
// session still holds the lock); a holder whose session ended loses it at
// once, with time left; a released lease is free at once.
func TestElection_Acquire(t *testing.T) {
	url := pgtest.URL(t)
	s := openAt(t, url)
	ctx := t.Context()
	db := connect(t, url)
	a, b := election(t, s, "a"), election(t, s, "b")

	if taken, prev := acquire(t, a, time.Hour); taken != fence("a", 1) || prev != (store.Fence{}) {
		t.Fatalf("a on a free lease: took %+v from %+v, want term 1 from nobody", taken, prev)
	}
	if taken, cur := acquire(t, b, time.Hour); taken != (store.Fence{}) || cur != fence("a", 1) {
		t.Fatalf("b while a lives: took %+v (current %+v), want nothing from a's term 1", taken, cur)
	}
	// The lease runs out, but a's session lives: b must wait for it to end.
	if _, err := db.Exec(ctx, `UPDATE leases SET expires_at = 1 WHERE name = $1`, electionLease); err != nil {
		t.Fatal(err)
	}
	if taken, _ := acquire(t, b, time.Hour); taken != (store.Fence{}) {
		t.Fatalf("b took %+v of an expired lease whose holder's session lives", taken)
	}
	if ok, err := a.Renew(ctx, fence("a", 1), time.Hour); err != nil || ok {
		t.Fatalf("a renews its expired lease = %v, %v; want false", ok, err)
	}
	// a's session ends (its process died): b takes over at once.
	a.Close()
	if taken, prev := acquireOnceFree(t, b, time.Hour); taken != fence("b", 2) || prev != (store.Fence{}) {
		t.Fatalf("b after a's session ended on an expired lease: took %+v from %+v, want term 2 from nobody", taken, prev)
	}
	c := election(t, s, "c")
	if taken, _ := acquire(t, c, time.Hour); taken != (store.Fence{}) {
		t.Fatalf("c took %+v while b leads", taken)
	}
	// b's session ends with an hour of lease left: c takes over, and
	// says from whom.
	b.Close()
	if taken, prev := acquireOnceFree(t, c, time.Hour); taken != fence("c", 3) || prev != fence("b", 2) {
		t.Fatalf("c after b's session ended: took %+v from %+v, want term 3 from b's term 2", taken, prev)
	}
	if ok, err := c.Renew(ctx, fence("c", 3), time.Hour); err != nil || !ok {
		t.Fatalf("c renews = %v, %v", ok, err)
	}
	// c releases: the lease is free at once for a new instance.
	if err := c.Release(ctx, fence("c", 3)); err != nil {
		t.Fatalf("Release = %v", err)
	}
	d := election(t, s, "d")
	if taken, prev := acquire(t, d, time.Hour); taken != fence("d", 4) || prev != (store.Fence{}) {
		t.Fatalf("d after c released: took %+v from %+v, want term 4 from nobody", taken, prev)
	}
	if _, err := c.Renew(ctx, fence("c", 3), time.Hour); err == nil {
		t.Error("c renews after its release: no error, want the session ended")
	}
	ls, err := s.Leases(ctx, electionLease)
	if err != nil || len(ls) != 1 {
		t.Fatalf("Leases = %v, %v", ls, err)
	}
	got, err := store.ParseFence(ls[0])
	if diff := cmp.Diff(fence("d", 4), got); diff != "" || err != nil {
		t.Errorf("the lease row (-want +got), %v:\n%s", err, diff)
	}
}

// TestElection_WatchSeesTheSessionEnd: Watch returns nil when its context
// ends with the session alive, and an error once the session ends - here
// because it stayed silent longer than idle_session_timeout, the lease's
// duration, as a frozen leader's would.
func TestElection_WatchSeesTheSessionEnd(t *testing.T) {
	url := pgtest.URL(t)
	s := openAt(t, url)
	var version int
	if err := connect(t, url).QueryRow(t.Context(), `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		t.Skip("idle_session_timeout needs PostgreSQL 14")
	}
	a := election(t, s, "a")
	const lease = time.Second
	if taken, _ := acquire(t, a, lease); taken.Term != 1 {
		t.Fatalf("took %+v", taken)
	}
	ctx, cancel := context.WithTimeout(t.Context(), lease/10)
	err := a.Watch(ctx)
	cancel()
	if err != nil {
		t.Fatalf("Watch with a live session = %v, want nil at the context's end", err)
	}
	start := time.Now()
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := a.Watch(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("Watch of a silent session = %v (context %v), want the session's end", err, ctx.Err())
	}
	t.Logf("the silent session ended %s into the watch", time.Since(start))
	b := election(t, s, "b")
	if taken, prev := acquireOnceFree(t, b, lease); taken != fence("b", 2) {
		t.Fatalf("b after a's silent session ended: took %+v from %+v", taken, prev)
	}
}
