package leader

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store/postgres"
)

// TestPostgresLock_OneLeaderAndHandover runs two electors on one schema:
// exactly one leads at a time, and when it stops the other takes over.
func TestPostgresLock_OneLeaderAndHandover(t *testing.T) {
	url := postgres.TestURL(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var leading, maxLeading atomic.Int32
	var mu sync.Mutex
	var order []string
	run := func(name string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		e := PostgresLock{URL: url, Log: log, CheckInterval: 50 * time.Millisecond, RetryInterval: 20 * time.Millisecond}
		go func() {
			defer close(done)
			e.Run(ctx, func(ctx context.Context) {
				n := leading.Add(1)
				for m := maxLeading.Load(); n > m && !maxLeading.CompareAndSwap(m, n); m = maxLeading.Load() {
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				<-ctx.Done()
				leading.Add(-1)
			})
		}()
		return func() { cancel(); <-done }
	}
	stopA := run("a")
	waitFor(t, func() bool { return leading.Load() == 1 })
	stopB := run("b")
	defer stopB()
	time.Sleep(200 * time.Millisecond) // b retries several times meanwhile
	if n := maxLeading.Load(); n != 1 {
		t.Fatalf("%d instances led at once", n)
	}
	stopA()
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if order[0] != "a" || order[1] != "b" {
		t.Errorf("leaders in order %v, want [a b]", order)
	}
	if n := maxLeading.Load(); n != 1 {
		t.Errorf("%d instances led at once", n)
	}
}

// TestPostgresLock_SchemasAreSeparate checks that deployments in different
// schemas of one database each get their own leader.
func TestPostgresLock_SchemasAreSeparate(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var leading atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		e := PostgresLock{URL: postgres.TestURL(t), Log: log, RetryInterval: 20 * time.Millisecond}
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.Run(ctx, func(ctx context.Context) { leading.Add(1); <-ctx.Done() })
		}()
	}
	waitFor(t, func() bool { return leading.Load() == 2 })
	cancel()
	wg.Wait()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
