package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// crashHelperEnv, when set, makes TestKill9_AcknowledgedWritesSurvive the
// child process: it writes to the store in that directory until killed.
const crashHelperEnv = "MESHNAMES_SQLITE_CRASH_DIR"

// TestKill9_AcknowledgedWritesSurvive runs a child process that writes and
// reports each acknowledged write, kills it with SIGKILL mid-stream, and
// checks that every acknowledged write is there after reopening, and that
// the dead process's lock does not block the reopening.
func TestKill9_AcknowledgedWritesSurvive(t *testing.T) {
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		s, err := sqlite.Open(dir)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		for i := 0; ; i++ {
			name := fmt.Sprintf("z%d", i)
			if _, err := store.Create(context.Background(), s, &resource.Object{Kind: resource.Zone, Name: name, Spec: &resource.ZoneSpec{}}); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
			fmt.Println("ack", name)
		}
	}

	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9_AcknowledgedWritesSurvive$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	lines := bufio.NewScanner(out)
	for len(acked) < 200 && lines.Scan() {
		name, ok := strings.CutPrefix(lines.Text(), "ack ")
		if !ok {
			t.Fatalf("child: %s", lines.Text())
		}
		acked = append(acked, name)
	}
	if len(acked) < 200 {
		t.Fatalf("child stopped after %d writes: %v", len(acked), lines.Err())
	}

	_, err = sqlite.Open(dir)
	if want := fmt.Sprintf("(pid %d)", cmd.Process.Pid); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open while the child runs = %v, want an error naming %s", err, want)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error is expected

	s := openIn(t, dir)
	for _, name := range acked {
		if _, err := s.Get(t.Context(), resource.Key{Kind: resource.Zone, Name: name}); err != nil {
			t.Fatalf("acknowledged write %s lost: %v", name, err)
		}
	}
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
