package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// openIn opens the store in dir and closes it when tb ends.
func openIn(tb testing.TB, dir string, opts ...sqlite.Option) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(dir, opts...)
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
	reopen := func() store.Store { return openIn(tb, dir, sqlite.WithClock(now)) }
	return reopen(), reopen
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

func TestOpen_SecondOpenFailsWhileLocked(t *testing.T) {
	dir := t.TempDir()
	first := openIn(t, dir)

	_, err := sqlite.Open(dir)
	if err == nil {
		t.Fatal("second Open of a data dir in use succeeded")
	}
	want := `data dir "` + dir + `" is in use by another meshnames process (pid ` + strconv.Itoa(os.Getpid()) + `)`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("second Open = %q, want it to contain %q", err, want)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := openIn(t, dir)
	if _, _, err := second.List(t.Context(), ""); err != nil {
		t.Errorf("List after reopening = %v", err)
	}
}

func TestOpen_CreatesDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	openIn(t, dir)
	for _, f := range []string{sqlite.LockFile, sqlite.DatabaseFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestOpen_DurableSettings checks the settings the durability promise
// rests on, on a fresh connection to the file the store wrote.
func TestOpen_DurableSettings(t *testing.T) {
	dir := t.TempDir()
	s := openIn(t, dir)
	if _, err := store.Create(t.Context(), s, &resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{}}); err != nil {
		t.Fatal(err)
	}
	mode, sync, err := sqlite.Pragmas(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 2 {
		t.Errorf("journal_mode = %q, synchronous = %d; want wal, 2 (FULL)", mode, sync)
	}
}

// TestKill9_AcknowledgedWritesSurvive kills a writing child process with
// SIGKILL and checks every acknowledged write after reopening.
func TestKill9_AcknowledgedWritesSurvive(t *testing.T) {
	storetest.Kill9(t, "TestKill9_AcknowledgedWritesSurvive", func(dir string) (store.Store, error) { return sqlite.Open(dir) })
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

// TestBackup_WhileWriting takes an online backup while writers go on and
// opens it.
func TestBackup_WhileWriting(t *testing.T) {
	storetest.Backup(t, func(dir string) (store.Store, error) { return sqlite.Open(dir) })
}
