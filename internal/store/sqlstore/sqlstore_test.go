package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	_ "modernc.org/sqlite" // the database these tests run on

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// schema is the SQLite backend's schema (every migration of it), so that
// these tests run on the real tables; extra migrations, numbered from
// 0100, are added per test.
func schema(t *testing.T, extra fstest.MapFS) fstest.MapFS {
	t.Helper()
	dir := filepath.Join("..", "sqlite", "migrations")
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("read %s: %d files, %v", dir, len(files), err)
	}
	fsys := fstest.MapFS{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fsys[filepath.Base(f)] = &fstest.MapFile{Data: b}
	}
	for name, f := range extra {
		fsys[name] = f
	}
	return fsys
}

// openSQLite opens a Store on a SQLite file in dir with migrations fsys.
func openSQLite(t *testing.T, dir string, fsys fstest.MapFS) (*Store, error) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "test.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	s, err := Open(t.Context(), Config{
		Dialect: Dialect{Name: "sqlite", Migrations: fsys, ReadTx: sql.TxOptions{ReadOnly: true},
			NowNanos: `CAST(unixepoch('subsec') * 1000000000 AS INTEGER)`},
		Read:  db,
		Write: db,
	})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() }) // ErrClosed when the test closed it
	}
	return s, err
}

func zoneOp(name string) store.Op {
	return store.Op{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Zone, Name: name, Spec: &resource.ZoneSpec{}}}
}

// TestCommit_StatementFailureFailsOnlyItsBatch makes one batch of a group
// fail inside the database (a trigger) and checks that the other batches
// of the group still commit, with consecutive revisions.
func TestCommit_StatementFailureFailsOnlyItsBatch(t *testing.T) {
	s, err := openSQLite(t, t.TempDir(), schema(t, fstest.MapFS{"0100_poison.sql": {Data: []byte(`
		CREATE TRIGGER poison BEFORE INSERT ON resources WHEN NEW.name = 'poison'
		BEGIN SELECT RAISE(ABORT, 'poisoned'); END;`)}}))
	if err != nil {
		t.Fatal(err)
	}
	var group []*backend.Request
	for _, name := range []string{"a", "poison", "b"} {
		group = append(group, backend.NewClaimed([]store.Op{zoneOp(name)}))
	}
	s.commit(group) // as the writer would, with all three in one transaction

	bad := group[1].Wait()
	if !errors.Is(bad.Err, store.ErrUnavailable) || !strings.Contains(bad.Err.Error(), "poisoned") {
		t.Errorf("poisoned batch: %v, want ErrUnavailable from the trigger", bad.Err)
	}
	a, b := group[0].Wait(), group[2].Wait()
	if a.Err != nil || b.Err != nil {
		t.Fatalf("other batches: %v, %v; want success", a.Err, b.Err)
	}
	if a.Results[0].Revision != 1 || b.Results[0].Revision != 2 {
		t.Errorf("revisions %d, %d; want 1, 2", a.Results[0].Revision, b.Results[0].Revision)
	}
}

func TestMigrate_RefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s, err := openSQLite(t, dir, schema(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.Exec(`INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = openSQLite(t, dir, schema(t, nil))
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open on a newer schema = %v, want a refusal", err)
	}
}

func TestMigrate_AppliesOnlyNewMigrations(t *testing.T) {
	dir := t.TempDir()
	s, err := openSQLite(t, dir, schema(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(t.Context(), s, zoneOp("east").Object); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening with one more migration applies only that one: 0001
	// would fail (its tables exist) if it ran again.
	base := len(schema(t, nil))
	s, err = openSQLite(t, dir, schema(t, fstest.MapFS{"0100_extra.sql": {Data: []byte(`CREATE TABLE extra (x BIGINT);`)}}))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.write.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != base+1 {
		t.Errorf("schema_migrations rows = %d, %v; want %d", n, err, base+1)
	}
	if _, err := s.Get(t.Context(), resource.Key{Kind: resource.Zone, Name: "east"}); err != nil {
		t.Errorf("Get after migration = %v", err)
	}
}

func TestMigrations_BadNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
	}{
		{"NoNumber", fstest.MapFS{"init.sql": {}}},
		{"Duplicate", fstest.MapFS{"0001_a.sql": {}, "01_b.sql": {}}},
		{"Empty", fstest.MapFS{"README": {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := migrations(tc.fsys); err == nil {
				t.Error("migrations() = nil error, want one")
			}
		})
	}
}

func TestDialect_Rebind(t *testing.T) {
	q := `UPDATE t SET a = ?, b = ? WHERE c = ?`
	if got := (&Dialect{}).rebind(q); got != q {
		t.Errorf("rebind without numbered placeholders = %q, want it unchanged", got)
	}
	want := `UPDATE t SET a = $1, b = $2 WHERE c = $3`
	if got := (&Dialect{NumberedPlaceholders: true}).rebind(q); got != want {
		t.Errorf("rebind = %q, want %q", got, want)
	}
}

// TestApply_AbandonedBeforeWriteWritesNothing checks that a request whose
// caller gave up before the writer claimed it is skipped.
func TestApply_AbandonedBeforeWriteWritesNothing(t *testing.T) {
	s, err := openSQLite(t, t.TempDir(), schema(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	// Hold the writer's only connection so that the request stays queued.
	conn, err := s.write.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.Apply(ctx, zoneOp("never"))
		done <- err
	}()
	// The writer may claim the request before we cancel (it then blocks on
	// the connection we hold); only an unclaimed request must be dropped.
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply = %v, want context.Canceled", err)
	}
	claimedFirst := strings.Contains(err.Error(), "may still commit")
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	// A later write is ordered after the abandoned one in the writer.
	if _, err := s.Apply(t.Context(), zoneOp("later")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context(), resource.Key{Kind: resource.Zone, Name: "never"})
	if claimedFirst {
		if err != nil {
			t.Errorf("a claimed request must commit: Get = %v", err)
		}
		return
	}
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("abandoned request was written: Get = %v", err)
	}
}
