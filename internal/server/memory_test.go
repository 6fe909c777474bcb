package server

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gcPercent reads the garbage collector's current target (GOGC).
func gcPercent() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestReturnMemoryWhenQuiet_EagerCollectionEndsWhenSettled pins when the
// eager collection of a large load ends: when the controllers settle, not
// at the first return of memory after a freeze, which a zone's initial sync
// (busy for minutes) puts off.
func TestReturnMemoryWhenQuiet_EagerCollectionEndsWhenSettled(t *testing.T) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		// collectEagerly leaves an operator's GOGC alone.
		os.Unsetenv("GOGC")
		t.Cleanup(func() { os.Setenv("GOGC", v) })
	}
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	ctx, cancel := context.WithCancel(context.Background())
	settled := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		large := func() (bool, int) { return true, 10 * eagerMin }
		returnMemoryWhenQuiet(ctx, slog.New(slog.DiscardHandler), func() uint64 { return 0 }, large, settled, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })

	waitGC := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for gcPercent() != want {
			if time.Now().After(deadline) {
				t.Fatalf("GOGC is %d, want %d", gcPercent(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitGC(loadGCPercent) // a large load collects eagerly
	close(settled)
	waitGC(100) // and no longer once the controllers settled
}
