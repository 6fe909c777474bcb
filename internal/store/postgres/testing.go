package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestDatabaseEnv names the environment variable holding the URL of the
// database tests use; DefaultTestDatabase is used when it is unset.
const (
	TestDatabaseEnv     = "MESHNAMES_TEST_POSTGRES"
	DefaultTestDatabase = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// TestURL creates a fresh schema test_<random> in the test database and
// returns a URL whose search_path selects it, so that each test has its
// own tables and may run in parallel with others. The schema is dropped
// when tb ends, after the cleanups registered later (closing stores) ran.
//
// When the database cannot be reached the test is skipped, unless CI=true,
// where it fails: CI must not pass by skipping the PostgreSQL tests.
func TestURL(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(TestDatabaseEnv)
	if base == "" {
		base = DefaultTestDatabase
	}
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("%s: %v", TestDatabaseEnv, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		msg := "PostgreSQL for tests is unreachable at " + u.Redacted() + ": " + err.Error() + "\n" +
			"Start one that trusts local connections and has a database named test, for example:\n" +
			"\tsudo apt-get install -y postgresql && sudo service postgresql start\n" +
			"\tsudo -u postgres createdb test   # and set local host auth to trust in pg_hba.conf\n" +
			"or point " + TestDatabaseEnv + " at another server."
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	defer conn.Close(context.Background())

	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails
	schema := "test_" + hex.EncodeToString(id[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("create test schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("drop test schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
