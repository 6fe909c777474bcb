package pebble_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/pebble"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// openIn opens the store in dir and closes it when tb ends.
func openIn(tb testing.TB, dir string, opts ...pebble.Option) *pebble.Store {
	tb.Helper()
	s, err := pebble.Open(dir, opts...)
	if err != nil {
		tb.Fatalf("Open(%q) = %v", dir, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			tb.Errorf("Close = %v", err)
		}
	})
	return s
}

func open(tb testing.TB, now func() time.Time) (store.Store, func() store.Store) {
	tb.Helper()
	dir := tb.TempDir()
	reopen := func() store.Store { return openIn(tb, dir, pebble.WithClock(now)) }
	return reopen(), reopen
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

func BenchmarkApplyCreate(b *testing.B) {
	storetest.BenchApplyCreate(b, openIn(b, b.TempDir()))
}

func BenchmarkApplyCreateParallel(b *testing.B) {
	storetest.BenchApplyCreateParallel(b, openIn(b, b.TempDir()))
}

func BenchmarkApplyCreateWithRecord(b *testing.B) {
	storetest.BenchApplyCreateWithRecord(b, openIn(b, b.TempDir()))
}

func BenchmarkChanges(b *testing.B) {
	storetest.BenchChanges(b, openIn(b, b.TempDir()))
}

func BenchmarkApplyPutLease(b *testing.B) {
	storetest.BenchApplyPutLease(b, openIn(b, b.TempDir()))
}

func BenchmarkLeasesPrefix(b *testing.B) {
	storetest.BenchLeasesPrefix(b, openIn(b, b.TempDir()))
}

func TestKill9_AcknowledgedWritesSurvive(t *testing.T) {
	storetest.Kill9(t, "TestKill9_AcknowledgedWritesSurvive", func(dir string) (store.Store, error) { return pebble.Open(dir) })
}

func TestOpen_SecondOpenFailsWhileLocked(t *testing.T) {
	dir := t.TempDir()
	first := openIn(t, dir)
	if _, err := pebble.Open(dir); err == nil || !strings.Contains(err.Error(), "is in use by another meshnames process") {
		t.Fatalf("second Open of a data dir in use = %v, want it refused", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	openIn(t, dir)
}

// TestBackup_WhileWriting takes an online backup while writers go on and
// opens it.
func TestBackup_WhileWriting(t *testing.T) {
	storetest.Backup(t, func(dir string) (store.Store, error) { return pebble.Open(dir) })
}
