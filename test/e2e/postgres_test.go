package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store/postgres"
)

// TestPostgres_TwoInstancesShareState runs two control planes on one
// PostgreSQL schema: a write through one is readable through the other
// within a moment (LISTEN/NOTIFY), and both created the default mesh
// without tripping over each other.
func TestPostgres_TwoInstancesShareState(t *testing.T) {
	url := postgres.TestURL(t)
	a := start(t, "a", "--store", url)
	b := start(t, "b", "--store", url)
	a.waitReady(60 * time.Second)
	b.waitReady(60 * time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, err := putService(ctx, a.api, "shared", 7000); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT through a = %d, %v", code, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, port, err := getServicePort(b.api, "shared")
		if err == nil && code == http.StatusOK && port == 7000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never saw the write made through a (last GET %d, port %d, %v)", code, port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// And back: an update through b reaches a.
	if code, err := putService(ctx, b.api, "shared", 7001); err != nil || code != http.StatusOK {
		t.Fatalf("PUT through b = %d, %v", code, err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, port, _ := getServicePort(a.api, "shared"); port == 7001 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a never saw the update made through b")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPostgres_UnreachableDatabase checks that a bad store URL stops the
// process with a message naming the setting.
func TestPostgres_UnreachableDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := "postgres://nobody@127.0.0.1:" + itoa(freePort(t)) + "/nothing?sslmode=disable&connect_timeout=2"
	_, stderr, err := run(t, ctx, nil, "serve", "--store", url, "--api-addr", "127.0.0.1:0")
	if err == nil {
		t.Fatalf("serve with an unreachable database exited 0")
	}
	if !strings.Contains(stderr, "store.url") {
		t.Errorf("error does not name store.url:\n%s", stderr)
	}
}
