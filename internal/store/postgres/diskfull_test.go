package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

func TestDiskFull_MapsSQLState53100(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{name: "disk_full", err: &pgconn.PgError{Code: "53100", Message: "could not extend file"}, want: true},
		{name: "wrapped", err: fmt.Errorf("commit: %w", &pgconn.PgError{Code: "53100"}), want: true},
		{name: "out_of_memory", err: &pgconn.PgError{Code: "53200"}},
		{name: "too_many_connections", err: &pgconn.PgError{Code: "53300"}},
		{name: "serialization_failure", err: &pgconn.PgError{Code: "40001"}},
		{name: "not-postgres", err: errors.New("no space left on device")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := diskFull(tc.err); got != tc.want {
				t.Errorf("diskFull(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestDiskFull_WriteIsErrDiskFull: a write that PostgreSQL refuses with
// disk_full (raised here by a trigger, as a full disk would from the
// insert) fails with store.ErrDiskFull, which is also ErrUnavailable; the
// store reads on, and writes again once the database takes them.
func TestDiskFull_WriteIsErrDiskFull(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := openAt(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := store.Create(ctx, s, zone("before")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$;
CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE ON resources FOR EACH ROW EXECUTE FUNCTION disk_full();`); err != nil {
		t.Fatal(err)
	}
	_, err = store.Create(ctx, s, zone("during"))
	if !errors.Is(err, store.ErrDiskFull) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Create on a full disk = %v, want ErrDiskFull and ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, resource.Key{Kind: resource.Zone, Name: "before"}); err != nil {
		t.Errorf("Get on a full disk = %v, want the zone", err)
	}
	if _, err := conn.Exec(ctx, `DROP TRIGGER disk_full ON resources`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, s, zone("after")); err != nil {
		t.Fatalf("Create once the disk has room = %v", err)
	}
}
