package pebble_test

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/pebble"
	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// snapshot is everything a reader can see of a store.
type snapshot struct {
	Objects  []*resource.Object
	Revision int64
	Changes  []store.Event
	Leases   []store.Lease
	Records  map[string][]store.Record
}

func read(t *testing.T, s store.Store) snapshot {
	t.Helper()
	ctx := t.Context()
	var sn snapshot
	var err error
	if sn.Objects, sn.Revision, err = s.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if sn.Changes, err = s.Changes(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if sn.Leases, err = s.Leases(ctx, ""); err != nil {
		t.Fatal(err)
	}
	sn.Records = map[string][]store.Record{}
	for _, stream := range []string{"audit", "history"} {
		if sn.Records[stream], err = s.(store.Recorder).Records(ctx, store.RecordQuery{Stream: stream, Limit: store.MaxRecordLimit}); err != nil {
			t.Fatal(err)
		}
	}
	return sn
}

func service(name string) *resource.Object {
	return &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: name,
		Labels: map[string]string{"app": name},
		Spec:   &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 80, AppProtocol: resource.ProtocolHTTP}}}}
}

// fill writes resources of several kinds (created, updated, with status,
// deleted), leases and records of two streams to s.
func fill(t *testing.T, s store.Store, n int) {
	t.Helper()
	ctx := t.Context()
	mustApply := func(ops ...store.Op) []store.Result {
		t.Helper()
		rs, err := s.Apply(ctx, ops...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if r.Err != nil {
				t.Fatalf("op %d: %v", i, r.Err)
			}
		}
		return rs
	}
	mustApply(store.Op{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}},
		store.Op{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{}}})
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		rs := mustApply(store.Op{Type: store.OpCreate, Object: service(name)},
			store.Op{Type: store.OpAppendRecord, DependsOn: []int{0}, Record: &store.Record{Stream: "audit",
				Terms: []string{"name=" + name, "kind=MeshService"}, Data: []byte(`{"verb":"create"}`)}})
		o := rs[0].Object
		o.Status = &resource.ServiceStatus{VIPs: []resource.VIP{{IP: fmt.Sprintf("241.0.%d.%d", i/250, i%250+1), Type: resource.VIPKuma}}}
		mustApply(store.Op{Type: store.OpPatchStatus, Object: o, Patch: &store.StatusPatch{Fields: []string{"vips"}}},
			store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: "vip/MeshService/" + o.Status.(*resource.ServiceStatus).VIPs[0].IP,
				Value: []byte{0, byte(i), 0xff}, ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)}},
			store.Op{Type: store.OpAppendRecord, Record: &store.Record{Stream: "history", Time: time.Unix(1700000000+int64(i), 7),
				Terms: []string{"vip=" + o.Status.(*resource.ServiceStatus).VIPs[0].IP, "name=" + name, "name=" + name}}})
		if i%3 == 0 {
			if _, err := store.Delete(ctx, s, o.Key(), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustApply(store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: "leader"}})
}

// TestOpen_MigratesSQLite writes a store with the SQLite backend, opens the
// directory with pebble, and checks that everything a reader sees is the
// same, that the SQLite file was set aside, and that the migrated store
// carries on from the revisions, record sequence numbers and tombstone
// times it was given.
func TestOpen_MigratesSQLite(t *testing.T) {
	clock := storetest.NewClock()
	dir := t.TempDir()
	old, err := sqlite.Open(dir, sqlite.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	fill(t, old, 30)
	before := read(t, old)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if pebble.SQLiteFile != sqlite.DatabaseFile {
		t.Fatalf("pebble.SQLiteFile = %q, sqlite.DatabaseFile = %q", pebble.SQLiteFile, sqlite.DatabaseFile)
	}

	s := openIn(t, dir, pebble.WithClock(clock.Now))
	after := read(t, s)
	if d := cmp.Diff(before, after, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("the migrated store differs (-sqlite +pebble):\n%s", d)
	}
	if len(before.Objects) != 22 || len(before.Leases) != 31 || len(before.Records["history"]) != 30 {
		t.Fatalf("the test wrote %d objects, %d leases, %d history records; want 22, 31, 30", len(before.Objects), len(before.Leases), len(before.Records["history"]))
	}
	for _, f := range []string{pebble.SQLiteFile, pebble.SQLiteFile + "-wal"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the migration (%v)", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, pebble.SQLiteFile+".migrated")); err != nil {
		t.Errorf("the SQLite file was not set aside: %v", err)
	}
	// Term lookups work on the copied records.
	got, err := s.Records(t.Context(), store.RecordQuery{Stream: "history", Terms: []string{"name=svc-7"}})
	if err != nil || len(got) != 1 || got[0].Terms[0] != "vip=241.0.0.8" {
		t.Errorf("Records(name=svc-7) = %v, %v", got, err)
	}

	// It carries on: revisions, record sequence numbers, tombstone ages.
	o, err := store.Create(t.Context(), s, service("after"))
	if err != nil || o.Revision != before.Revision+1 {
		t.Fatalf("create after migration: revision %v, %v; want %d", o, err, before.Revision+1)
	}
	if _, err := s.Apply(t.Context(), store.Op{Type: store.OpAppendRecord, Record: &store.Record{Stream: "audit"}}); err != nil {
		t.Fatal(err)
	}
	audit, err := s.Records(t.Context(), store.RecordQuery{Stream: "audit", Descending: true, Limit: 1})
	if err != nil || audit[0].Seq <= before.Records["history"][29].Seq {
		t.Errorf("record after migration: %v, %v; want a sequence number above %d", audit, err, before.Records["history"][29].Seq)
	}
	clock.Advance(2 * time.Hour)
	if n, err := s.Compact(t.Context(), time.Hour); err != nil || n != 10 {
		t.Errorf("Compact after migration = %d, %v; want the 10 migrated tombstones", n, err)
	}
}

// TestOpen_MigrationFinishesWhatWasCutShort opens directories as a
// migration interrupted at each step leaves them.
func TestOpen_MigrationFinishesWhatWasCutShort(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cut makes dir look as an interrupted migration left it, from a
		// complete migration (pebble) and the SQLite store it came from
		// (sqlite).
		cut func(t *testing.T, dir, pebbleDir, sqliteDir string)
	}{
		{"CopyHalfWritten", func(t *testing.T, dir, _, sqliteDir string) {
			copyDir(t, sqliteDir, dir)
			if err := os.MkdirAll(filepath.Join(dir, pebble.Dir+".new"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, pebble.Dir+".new", "000001.log"), []byte("half"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"RenamedNotRetired", func(t *testing.T, dir, pebbleDir, sqliteDir string) {
			copyDir(t, sqliteDir, dir)
			copyDir(t, filepath.Join(pebbleDir, pebble.Dir), filepath.Join(dir, pebble.Dir))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := storetest.NewClock()
			sqliteDir := t.TempDir()
			old, err := sqlite.Open(sqliteDir, sqlite.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			fill(t, old, 5)
			want := read(t, old)
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			pebbleDir := t.TempDir()
			copyDir(t, sqliteDir, pebbleDir)
			done, err := pebble.Open(pebbleDir, pebble.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			if err := done.Close(); err != nil {
				t.Fatal(err)
			}

			dir := t.TempDir()
			tc.cut(t, dir, pebbleDir, sqliteDir)
			s := openIn(t, dir, pebble.WithClock(clock.Now))
			if d := cmp.Diff(want, read(t, s), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("store after finishing the migration (-want +got):\n%s", d)
			}
			if _, err := os.Stat(filepath.Join(dir, pebble.SQLiteFile)); !os.IsNotExist(err) {
				t.Errorf("the SQLite file is still in place (%v)", err)
			}
			if _, err := os.Stat(filepath.Join(dir, pebble.Dir+".new")); !os.IsNotExist(err) {
				t.Errorf("the half-written copy is still there (%v)", err)
			}
		})
	}
}

// TestOpen_RefusesOtherSQLiteSchemas checks that a SQLite file of a schema
// the migration does not read is refused with what to do, and left alone.
func TestOpen_RefusesOtherSQLiteSchemas(t *testing.T) {
	for version, want := range map[int]string{
		2: "its schema is version 2, the migration reads version 3: start meshnames once with store.engine sqlite",
		4: "its schema is version 4, newer than this meshnames knows (3)",
	} {
		t.Run(fmt.Sprint(version), func(t *testing.T) {
			dir := t.TempDir()
			old, err := sqlite.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			u := url.URL{Scheme: "file", Path: filepath.Join(dir, sqlite.DatabaseFile)}
			db, err := sql.Open("sqlite", u.String())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version > ?`, version); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO schema_migrations (version, name) VALUES (?, 'x') ON CONFLICT DO NOTHING`, version); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = pebble.Open(dir)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open = %v, want an error containing %q", err, want)
			}
			if _, err := os.Stat(filepath.Join(dir, pebble.Dir)); !os.IsNotExist(err) {
				t.Errorf("a refused migration left %s (%v)", pebble.Dir, err)
			}
			if _, err := os.Stat(filepath.Join(dir, sqlite.DatabaseFile)); err != nil {
				t.Errorf("a refused migration moved the SQLite file: %v", err)
			}
		})
	}
}

// copyDir copies the regular files of src into dst (created).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == pebble.LockFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
