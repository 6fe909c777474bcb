package pebble

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// gatedFS is the operating system's file system with a gate before every
// sync of the write-ahead log (the *.log files) and of the store's probe
// of a disk that failed (probeFile): gate, when set, is called first, and
// an error it returns is the sync's.
type gatedFS struct {
	vfs.FS
	gate *atomic.Pointer[func() error]
}

func (fs gatedFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") && filepath.Base(name) != probeFile {
		return f, err
	}
	return gatedFile{File: f, gate: fs.gate}, nil
}

func (fs gatedFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f, err)
}

func (fs gatedFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	return fs.wrap(newname, f, err)
}

type gatedFile struct {
	vfs.File
	gate *atomic.Pointer[func() error]
}

func (f gatedFile) pass() error {
	if g := f.gate.Load(); g != nil {
		return (*g)()
	}
	return nil
}

func (f gatedFile) Sync() error {
	if err := f.pass(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f gatedFile) SyncData() error {
	if err := f.pass(); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f gatedFile) SyncTo(length int64) (bool, error) {
	if err := f.pass(); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}

// openGated opens a store in a new directory whose log syncs pass gate,
// and creates a mesh in it: start is its revision.
func openGated(t *testing.T) (s *Store, gate *atomic.Pointer[func() error], start int64) {
	t.Helper()
	gate = &atomic.Pointer[func() error]{}
	s, err := Open(t.TempDir(), func(o *options) { o.fs = gatedFS{FS: vfs.Default, gate: gate} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rs, err := s.Apply(context.Background(), meshOp("before"))
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	return s, gate, rs[0].Revision
}

func meshOp(name string) store.Op {
	return store.Op{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Mesh, Name: name, Spec: &resource.MeshSpec{}}}
}

type applyResult struct {
	rs  []store.Result
	err error
	// early says the call returned while release was still open.
	early bool
}

// applyAsync applies op and reports, with the outcome, whether Apply
// returned before release was closed.
func applyAsync(s *Store, op store.Op, release <-chan struct{}) <-chan applyResult {
	c := make(chan applyResult, 1)
	go func() {
		rs, err := s.Apply(context.Background(), op)
		c <- applyResult{rs, err, !closed(release)}
	}()
	return c
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// waitApplied waits until the database holds the mesh named: the writer
// applied its group. (Get would wait for the group's sync.)
func waitApplied(t *testing.T, s *Store, name string) {
	t.Helper()
	key := objectKey(resource.Key{Kind: resource.Mesh, Name: name})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, c, err := s.db.Get(key)
		if err == nil {
			_ = c.Close()
			return
		}
		if !errors.Is(err, pebble.ErrNotFound) || time.Now().After(deadline) {
			t.Fatalf("the database's Get(%s) = %v, want it applied", name, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWriter_AppliesTheNextGroupWhileTheLogSyncs pins the pipelined
// writer: while the disk syncs one group, the next is applied; neither is
// acknowledged, nor shown by the change feed, before its sync; then both
// are, in order.
func TestWriter_AppliesTheNextGroupWhileTheLogSyncs(t *testing.T) {
	ctx := context.Background()
	s, gate, start := openGated(t)

	release := make(chan struct{})
	t.Cleanup(func() { // before the store's Close, which waits for the syncs
		if !closed(release) {
			close(release)
		}
	})
	hold := func() error { <-release; return nil }
	gate.Store(&hold)
	a := applyAsync(s, meshOp("a"), release)
	waitApplied(t, s, "a")
	b := applyAsync(s, meshOp("b"), release)
	waitApplied(t, s, "b") // the writer did not wait for a's sync

	if evs, err := s.Changes(ctx, start, 0); err != nil || len(evs) != 0 {
		t.Fatalf("Changes(%d) before the sync = %v, %v; want nothing", start, evs, err)
	}
	type getResult struct {
		err   error
		early bool
	}
	getA := make(chan getResult, 1)
	go func() {
		_, err := s.Get(ctx, resource.Key{Kind: resource.Mesh, Name: "a"})
		getA <- getResult{err, !closed(release)}
	}()

	close(release)
	if g := <-getA; g.err != nil || g.early {
		t.Fatalf("Get(a) = %v, returned before a's sync: %v", g.err, g.early)
	}
	ra, rb := <-a, <-b
	if ra.early || rb.early {
		t.Fatalf("Apply returned before the log was synced: a %v, b %v", ra.early, rb.early)
	}
	if ra.err != nil || ra.rs[0].Err != nil || rb.err != nil || rb.rs[0].Err != nil {
		t.Fatalf("after the sync: Apply(a) = %v, %v; Apply(b) = %v, %v", ra.rs, ra.err, rb.rs, rb.err)
	}
	evs, err := s.Changes(ctx, start, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Key.Name)
	}
	if strings.Join(got, ",") != "a,b" || evs[0].Revision != ra.rs[0].Revision || evs[1].Revision != rb.rs[0].Revision {
		t.Fatalf("Changes(%d) after the sync = %v (revisions %v), want a then b at %d, %d", start, got, evs, ra.rs[0].Revision, rb.rs[0].Revision)
	}
}

// TestWriter_FailedSyncFailsItsGroupAndEveryLaterOne checks that a write
// whose log sync failed is not acknowledged, nor shown by the change feed,
// and that no write is acknowledged after it while the disk fails: its
// group was applied and may be what later groups read. Once the disk
// syncs again, the store reopens its database by itself and takes writes.
func TestWriter_FailedSyncFailsItsGroupAndEveryLaterOne(t *testing.T) {
	ctx := context.Background()
	s, gate, start := openGated(t)

	errDisk := errors.New("injected: the disk refused the sync")
	fail := func() error { return errDisk }
	gate.Store(&fail)
	if _, err := s.Apply(ctx, meshOp("lost")); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), errDisk.Error()) {
		t.Fatalf("Apply with a failing sync = %v, want ErrUnavailable naming the disk's error", err)
	}
	if _, err := s.Apply(ctx, meshOp("after")); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), errDisk.Error()) {
		t.Fatalf("Apply after a failed sync = %v, want ErrUnavailable naming the first failure", err)
	}
	if evs, err := s.Changes(ctx, start, 0); err != nil || len(evs) != 0 {
		t.Fatalf("Changes(%d) = %v, %v; want nothing after the failed sync", start, evs, err)
	}
	if _, err := s.Get(ctx, resource.Key{Kind: resource.Mesh, Name: "lost"}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get of the write whose sync failed = %v, want ErrUnavailable", err)
	}
	if _, _, err := s.List(ctx, resource.Mesh); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("List after the failed sync = %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, resource.Key{Kind: resource.Mesh, Name: "before"}); err != nil {
		t.Fatalf("Get of a write synced before the failure = %v", err)
	}

	gate.Store(nil)
	rev := waitWrites(t, s, "resumed")
	evs, err := s.Changes(ctx, start, 0)
	if err != nil {
		t.Fatal(err)
	}
	// "lost" was written to the log but never synced: whether it is
	// there after the reopen is the disk's business, as after a crash.
	if n := len(evs); n == 0 || evs[n-1].Key.Name != "resumed" || evs[n-1].Revision != rev {
		t.Fatalf("Changes(%d) after the reopen = %v, want it to end with resumed at %d", start, evs, rev)
	}
}

// waitWrites applies a mesh named name until the store takes it, and
// returns its revision.
func waitWrites(t *testing.T, s *Store, name string) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs, err := s.Apply(context.Background(), meshOp(name))
		if err == nil && rs[0].Err == nil {
			return rs[0].Revision
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store still refuses writes: %v %v", err, rs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
