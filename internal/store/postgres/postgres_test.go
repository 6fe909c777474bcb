package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// testWriter routes log lines to the test log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// openAt opens a store on url, logging to tb, and closes it when tb ends.
func openAt(tb testing.TB, url string, opts ...Option) *Store {
	tb.Helper()
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(testWriter{tb}, nil)))}, opts...)
	s, err := Open(tb.Context(), url, opts...)
	if err != nil {
		tb.Fatalf("Open = %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			tb.Errorf("Close = %v", err)
		}
	})
	return s
}

func open(tb testing.TB, now func() time.Time) (store.Store, func() store.Store) {
	tb.Helper()
	url := pgtest.URL(tb)
	reopen := func() store.Store { return openAt(tb, url, WithClock(now)) }
	return reopen(), reopen
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

func zone(name string) *resource.Object {
	return &resource.Object{Kind: resource.Zone, Name: name, Spec: &resource.ZoneSpec{}}
}

// waitClosed fails the test unless ch is closed within a bounded time.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Changed() not closed", what)
	}
}

// TestTwoStores_WriteWakesTheOther: two instances on one schema; a write
// through one wakes the other's Changed (through NOTIFY, as the safety poll
// is off) and shows in its change feed.
func TestTwoStores_WriteWakesTheOther(t *testing.T) {
	url := pgtest.URL(t)
	a := openAt(t, url, WithPollInterval(0))
	b := openAt(t, url, WithPollInterval(0))
	ctx := t.Context()

	ch := b.Changed()
	created, err := store.Create(ctx, a, zone("east"))
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ch, "write through a")
	evs, err := b.Changes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Revision != created.Revision {
		t.Fatalf("b.Changes(0) = %v, want the write through a at revision %d", evs, created.Revision)
	}
	if diff := cmp.Diff(created, evs[0].Object); diff != "" {
		t.Errorf("b sees (-want +got):\n%s", diff)
	}

	// And the other way round, with a conflict decided across instances.
	ch = a.Changed()
	upd := created.Clone()
	upd.Labels = map[string]string{"by": "b"}
	if _, err := store.Update(ctx, b, upd); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ch, "write through b")
	upd.Labels = map[string]string{"by": "a"}
	if _, err := store.Update(ctx, a, upd); !errors.Is(err, store.ErrConflict) {
		t.Errorf("stale Update through a = %v, want ErrConflict", err)
	}
}

// TestTwoStores_ConcurrentWritersKeepRevisionOrder writes through two
// instances at once and checks that each instance's change feed holds every
// write exactly once, in increasing revision order.
func TestTwoStores_ConcurrentWritersKeepRevisionOrder(t *testing.T) {
	url := pgtest.URL(t)
	stores := []*Store{openAt(t, url), openAt(t, url)}
	ctx := t.Context()
	const each = 50
	var wg sync.WaitGroup
	for i, s := range stores {
		for j := range each {
			wg.Go(func() {
				if _, err := store.Create(ctx, s, zone(fmt.Sprintf("w%d-%d", i, j))); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for i, s := range stores {
		evs, err := s.Changes(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2*each {
			t.Fatalf("store %d: %d events, want %d", i, len(evs), 2*each)
		}
		for k := 1; k < len(evs); k++ {
			if evs[k].Revision != evs[k-1].Revision+1 {
				t.Fatalf("store %d: revision %d after %d", i, evs[k].Revision, evs[k-1].Revision)
			}
		}
	}
}

// TestOpen_ConcurrentMigrations opens several stores on one fresh schema
// at once: the advisory lock makes exactly one of them migrate.
func TestOpen_ConcurrentMigrations(t *testing.T) {
	url := pgtest.URL(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s, err := Open(t.Context(), url)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	// Opening again is a no-op migration.
	s := openAt(t, url)
	if _, err := store.Create(t.Context(), s, zone("east")); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var migrations, metaRows int
	if err := conn.QueryRow(t.Context(), "SELECT COUNT(*) FROM schema_migrations").Scan(&migrations); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(t.Context(), "SELECT COUNT(*) FROM meta").Scan(&metaRows); err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("embedded migrations: %v, %v", files, err)
	}
	if migrations != len(files) || metaRows != 1 {
		t.Errorf("schema_migrations has %d rows, meta %d; want %d (one per migration) and 1", migrations, metaRows, len(files))
	}
}

// TestLeases_CollationAndIndex checks what the lease prefix query rests on
// whatever the database's locale (the test database may well be C, where
// a missing COLLATE "C" would go unnoticed): the name column collates
// bytewise, and a range query on it, with the parameters typed as
// sqlstore's are, is served by the primary key index in name order.
func TestLeases_CollationAndIndex(t *testing.T) {
	url := pgtest.URL(t)
	s := openAt(t, url)
	ops := make([]store.Op, 0, 200)
	for i := range 200 {
		ops = append(ops, store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: fmt.Sprintf("vip/%03d", i)}})
	}
	if _, err := s.Apply(t.Context(), ops...); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var collation string
	err = conn.QueryRow(t.Context(), `SELECT collation_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'leases' AND column_name = 'name'`).Scan(&collation)
	if err != nil || collation != "C" {
		t.Errorf("leases.name collation = %q, %v; want C", collation, err)
	}
	if _, err := conn.Exec(t.Context(), `ANALYZE leases; SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	// The query of sqlstore's leasesPrefix, with numbered placeholders.
	rows, err := conn.Query(t.Context(), `EXPLAIN SELECT name, value, expires_at FROM leases
		WHERE name >= $1 AND name < $2 ORDER BY name`, "vip/1", "vip/2")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "\n"); !strings.Contains(p, "Index Scan using leases_pkey") || strings.Contains(p, "Sort") {
		t.Errorf("plan of the prefix query:\n%s\nwant an index scan of leases_pkey without a sort", p)
	}
}

// TestListener_ReconnectsAndWakes kills the listener's connection and
// checks that the listener comes back: it wakes waiters once after
// reconnecting, and later notifications arrive again.
func TestListener_ReconnectsAndWakes(t *testing.T) {
	url := pgtest.URL(t)
	a := openAt(t, url, WithPollInterval(0))
	b := openAt(t, url, WithPollInterval(0))
	ctx := t.Context()

	pid := b.listener.pid.Load()
	ch := b.Changed()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	// The loss wakes readers at once (so that an instance whose database
	// is gone notices), and the reconnection, at least 100 ms later, wakes
	// them again (so that they read what was notified meanwhile).
	waitClosed(t, ch, "loss")
	ch = b.Changed()
	waitClosed(t, ch, "reconnect")
	if got := b.listener.pid.Load(); got == pid {
		t.Fatalf("listener still on backend %d after it was terminated", pid)
	}

	ch = b.Changed()
	if _, err := store.Create(ctx, a, zone("after-reconnect")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ch, "write after reconnect")
}

// TestListener_IgnoresOwnAndOtherSchemas checks the payload filter: a
// notification from this instance or for another schema does not wake.
func TestListener_IgnoresOwnAndOtherSchemas(t *testing.T) {
	l := &listener{schema: "s p", instance: "me"}
	other := &listener{schema: "s p", instance: "you"}
	elsewhere := &listener{schema: "other", instance: "you"}
	if !l.wanted(other.payload(7)) {
		t.Error("notification from another instance of our schema ignored")
	}
	if l.wanted(l.payload(7)) {
		t.Error("our own notification wakes us")
	}
	if l.wanted(elsewhere.payload(7)) {
		t.Error("notification for another schema wakes us")
	}
}

// TestOpen_UnreachableIsUnavailable checks the error class of a database
// that cannot be reached.
// TestConnConfig_IdleInTransactionTimeout checks that store connections end
// a transaction left idle by an instance that was cut off, unless the URL
// says otherwise.
func TestParseConfig_IdleInTransactionTimeout(t *testing.T) {
	url := pgtest.URL(t)
	for _, tc := range []struct{ url, want string }{
		{url, "10s"},
		{url + "&idle_in_transaction_session_timeout=2500", "2500ms"},
	} {
		cfg, err := ParseConfig(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.ConnectConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = conn.QueryRow(t.Context(), "SHOW idle_in_transaction_session_timeout").Scan(&got)
		_ = conn.Close(t.Context())
		if err != nil || got != tc.want {
			t.Errorf("idle_in_transaction_session_timeout = %q, %v; want %q", got, err, tc.want)
		}
	}
}

func TestOpen_UnreachableIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open(unreachable) = %v, want ErrUnavailable", err)
	}
}

func BenchmarkApplyCreate(b *testing.B) {
	storetest.BenchApplyCreate(b, openAt(b, pgtest.URL(b)))
}

func BenchmarkApplyCreateParallel(b *testing.B) {
	storetest.BenchApplyCreateParallel(b, openAt(b, pgtest.URL(b)))
}

func BenchmarkApplyCreateWithRecord(b *testing.B) {
	storetest.BenchApplyCreateWithRecord(b, openAt(b, pgtest.URL(b)))
}

func BenchmarkChanges(b *testing.B) {
	storetest.BenchChanges(b, openAt(b, pgtest.URL(b)))
}

func BenchmarkApplyPutLease(b *testing.B) {
	storetest.BenchApplyPutLease(b, openAt(b, pgtest.URL(b)))
}

func BenchmarkLeasesPrefix(b *testing.B) {
	storetest.BenchLeasesPrefix(b, openAt(b, pgtest.URL(b)))
}

// TestWriter_StatementFailureFailsOnlyItsBatch makes one batch fail
// inside the database (a trigger) while others are written beside it:
// the writer sends a group's writes in one statement, so when that fails
// it writes the group's batches one transaction each, and only the
// poisoned batch fails.
func TestWriter_StatementFailureFailsOnlyItsBatch(t *testing.T) {
	url := pgtest.URL(t)
	s := openAt(t, url)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `
		CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poisoned'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER poison BEFORE INSERT ON resources FOR EACH ROW EXECUTE FUNCTION poison();`); err != nil {
		t.Fatal(err)
	}
	zone := func(name string) store.Op {
		return store.Op{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Zone, Name: name, Spec: &resource.ZoneSpec{}}}
	}
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			name := fmt.Sprintf("z%d-%d", round, i)
			if i == 7 {
				name = "poison"
			}
			wg.Go(func() { _, errs[i] = s.Apply(t.Context(), zone(name)) })
		}
		wg.Wait()
		for i, err := range errs {
			switch {
			case i == 7 && (!errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "poisoned")):
				t.Errorf("round %d: poisoned batch: %v, want ErrUnavailable from the trigger", round, err)
			case i != 7 && err != nil:
				t.Errorf("round %d: batch %d: %v, want success", round, i, err)
			}
		}
	}
	evs, err := s.Changes(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Revision != int64(i+1) {
			t.Fatalf("event %d has revision %d: revisions must be consecutive", i, e.Revision)
		}
	}
	if len(evs) != 5*15 {
		t.Errorf("%d events, want %d", len(evs), 5*15)
	}
}
