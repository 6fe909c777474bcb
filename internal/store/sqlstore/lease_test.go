package sqlstore

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

func TestLeases_PrefixUsesPrimaryKey(t *testing.T) {
	s, err := openSQLite(t, t.TempDir(), schema(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.write.Query(`EXPLAIN QUERY PLAN `+s.q.leasesPrefix, "vip/", backend.PrefixEnd("vip/"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "; "); !strings.Contains(p, "SEARCH leases USING PRIMARY KEY (name>? AND name<?)") ||
		strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("plan of the prefix query: %s; want a primary key range search without a sort", p)
	}
}

// TestCommit_LeaseStatementFailureFailsOnlyItsBatch makes a lease write of
// one batch fail inside the database and checks that the other batches of
// the group, lease and resource writes alike, still commit.
func TestCommit_LeaseStatementFailureFailsOnlyItsBatch(t *testing.T) {
	s, err := openSQLite(t, t.TempDir(), schema(t, fstest.MapFS{"0100_poison.sql": {Data: []byte(`
		CREATE TRIGGER poison BEFORE INSERT ON leases WHEN NEW.name = 'poison'
		BEGIN SELECT RAISE(ABORT, 'poisoned'); END;`)}}))
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string) store.Op {
		return store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: name, Value: []byte(name)}}
	}
	var group []*backend.Request
	for _, ops := range [][]store.Op{
		{put("a"), zoneOp("a")},
		{zoneOp("p"), put("poison")},
		{put("b"), zoneOp("b")},
	} {
		group = append(group, backend.NewClaimed(ops))
	}
	s.commit(group)

	bad := group[1].Wait()
	if !errors.Is(bad.Err, store.ErrUnavailable) || !strings.Contains(bad.Err.Error(), "poisoned") ||
		!strings.Contains(bad.Err.Error(), `put lease "poison"`) {
		t.Errorf("poisoned batch: %v, want ErrUnavailable from the trigger, naming the lease", bad.Err)
	}
	a, b := group[0].Wait(), group[2].Wait()
	if a.Err != nil || b.Err != nil {
		t.Fatalf("other batches: %v, %v; want success", a.Err, b.Err)
	}
	if a.Results[1].Revision != 1 || b.Results[1].Revision != 2 || a.Results[0].Revision != 0 || b.Results[0].Revision != 0 {
		t.Errorf("revisions %v, %v; want resources 1, 2 and leases 0", a.Results, b.Results)
	}
	ls, err := s.Leases(t.Context(), "")
	if err != nil || len(ls) != 2 || ls[0].Name != "a" || ls[1].Name != "b" {
		t.Errorf("Leases = %v, %v; want a and b", ls, err)
	}
	if _, err := s.Get(t.Context(), resource.Key{Kind: resource.Zone, Name: "p"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the poisoned batch's resource was written: Get = %v", err)
	}
}

// TestMigrate_AddsLeasesToAnExistingDatabase opens a database created
// before leases existed (only 0001 applied, with a resource in it) with
// the current migrations.
func TestMigrate_AddsLeasesToAnExistingDatabase(t *testing.T) {
	dir := t.TempDir()
	full := schema(t, nil)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	older := &Store{d: Dialect{Name: "sqlite", Migrations: fstest.MapFS{"0001_init.sql": full["0001_init.sql"]}}, write: db}
	if err := older.migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO resources VALUES ('Zone', '', 'east', 1, 1, false, '{}', '{}', '', 1, 1);
		UPDATE meta SET revision = 1`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := openSQLite(t, dir, full)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), resource.Key{Kind: resource.Zone, Name: "east"}); err != nil {
		t.Errorf("Get after migration = %v", err)
	}
	rs, err := s.Apply(t.Context(), store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: "l"}}, zoneOp("west"))
	if err != nil || rs[0].Err != nil || rs[1].Err != nil || rs[1].Revision != 2 {
		t.Fatalf("Apply after migration = %v, %v", rs, err)
	}
	if ls, err := s.Leases(t.Context(), ""); err != nil || len(ls) != 1 {
		t.Errorf("Leases after migration = %v, %v", ls, err)
	}
}
