// Package pgtest gives tests a PostgreSQL schema of their own and a TCP
// proxy that cuts connections to it. It is for tests and benchmarks only:
// it imports testing, so production code must not import it (the layering
// test checks that the binary does not).
//
// It imports pgx and the standard library only, not the store, so that the
// store's own tests can use it. Its functions are safe for concurrent use
// by parallel tests; a Proxy's methods are safe for concurrent use.
package pgtest

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

// DatabaseEnv names the environment variable holding the URL of the
// database tests use; DefaultDatabase is used when it is unset.
const (
	DatabaseEnv     = "MESHNAMES_TEST_POSTGRES"
	DefaultDatabase = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// URL creates a fresh schema test_<random> in the test database and
// returns a URL whose search_path selects it, so that each test has its
// own tables and may run in parallel with others. The schema is dropped
// when tb ends, after the cleanups registered later (closing stores) ran.
//
// When the database cannot be reached the test is skipped, unless CI=true,
// where it fails: CI must not pass by skipping the PostgreSQL tests.
func URL(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(DatabaseEnv)
	if base == "" {
		base = DefaultDatabase
	}
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("%s: %v", DatabaseEnv, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		msg := "PostgreSQL for tests is unreachable at " + u.Redacted() + ": " + err.Error() + "\n" +
			"Start one that trusts local connections and has a database named test, for example:\n" +
			"\tsudo apt-get install -y postgresql && sudo service postgresql start\n" +
			"\tsudo -u postgres createdb test   # and set local host auth to trust in pg_hba.conf\n" +
			"or point " + DatabaseEnv + " at another server."
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

// Proxy forwards TCP connections to the database of a test URL, so that a
// test can cut an instance off from PostgreSQL without stopping it.
type Proxy struct {
	// URL is the test URL with the proxy in place of the database's address.
	URL string

	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	done   sync.WaitGroup
}

// StartProxy starts a proxy on a free loopback port to the database of url
// (a URL from URL) and stops it when tb ends.
func StartProxy(tb testing.TB, rawURL string) *Proxy {
	tb.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
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
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) accept() {
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
