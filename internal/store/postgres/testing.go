package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
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

// TestProxy forwards TCP connections to the database of a test URL, so that
// a test can cut an instance off from PostgreSQL without stopping it.
type TestProxy struct {
	// URL is the test URL with the proxy in place of the database's address.
	URL string

	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	done   sync.WaitGroup
}

// StartTestProxy starts a proxy on a free loopback port to the database of
// url (a URL from TestURL) and stops it when tb ends.
func StartTestProxy(tb testing.TB, rawURL string) *TestProxy {
	tb.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &TestProxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	u.Host = ln.Addr().String()
	p.URL = u.String()
	p.done.Go(p.accept)
	tb.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
		p.done.Wait()
	})
	return p
}

// Cut closes every connection and closes new ones at once, until Restore.
func (p *TestProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore lets connections through again.
func (p *TestProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *TestProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.mu.Unlock()
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut { // cut while dialling
			p.mu.Unlock()
			_, _ = c.Close(), up.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
			p.done.Go(func() {
				_, _ = io.Copy(pair[0], pair[1])
				_, _ = pair[0].Close(), pair[1].Close()
				p.mu.Lock()
				delete(p.conns, pair[0])
				delete(p.conns, pair[1])
				p.mu.Unlock()
			})
		}
	}
}
