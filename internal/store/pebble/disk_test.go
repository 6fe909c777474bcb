package pebble

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// fullDisk injects "no space left on device" into the writes of a file
// system while it is full: the log's and the tables' writes, syncs and
// creations, and the store's probe. pebble's MANIFEST, CURRENT and
// OPTIONS files are spared: pebble v1.1.5 makes their failure fatal, and
// on a real disk the store's reserve (reserveBytes) leaves room for them.
type fullDisk struct {
	full  atomic.Bool
	avail atomic.Uint64 // what GetDiskUsage says is free; 0 for the truth
}

func (d *fullDisk) MaybeError(op errorfs.Op, path string) error {
	if !d.full.Load() || op.OpKind() != errorfs.OpKindWrite {
		return nil
	}
	switch op {
	case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFilePreallocate:
	default:
		return nil
	}
	base := filepath.Base(path)
	if strings.HasSuffix(base, ".log") || strings.HasSuffix(base, ".sst") || base == probeFile {
		return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	}
	return nil
}

// lowFS reports the free space fullDisk says.
type lowFS struct {
	vfs.FS
	d *fullDisk
}

func (fs lowFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	u, err := fs.FS.GetDiskUsage(path)
	if a := fs.d.avail.Load(); a > 0 && err == nil {
		u.AvailBytes = a
	}
	return u, err
}

// openFull opens a store on the operating system's file system behind
// errorfs with d's injector.
func openFull(t *testing.T, dir string, d *fullDisk) *Store {
	t.Helper()
	fs := lowFS{FS: errorfs.Wrap(vfs.Default, d), d: d}
	s, err := Open(dir, func(o *options) { o.fs = fs })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func zoneOp(name string) store.Op {
	return store.Op{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Zone, Name: name, Spec: &resource.ZoneSpec{}}}
}

// TestDiskFull_WritesRefusedThenResume: writers run while the disk fills
// (errorfs injects ENOSPC into the log's writes); writes fail with
// store.ErrDiskFull, reads go on, and once the disk has room again the
// store reopens its database by itself and takes writes within seconds.
// After a restart on the plain file system every acknowledged write is
// there, once, in revision order.
func TestDiskFull_WritesRefusedThenResume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := &fullDisk{}
	s := openFull(t, dir, d)

	const writers = 6
	var (
		mu    sync.Mutex
		acked = map[string]int64{} // name -> revision
		full  atomic.Int64         // ErrDiskFull answers
		other atomic.Value         // an unexpected error
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				rs, err := s.Apply(ctx, zoneOp(name))
				switch {
				case err == nil && rs[0].Err == nil:
					mu.Lock()
					acked[name] = rs[0].Revision
					mu.Unlock()
				case errors.Is(err, store.ErrDiskFull):
					full.Add(1)
					time.Sleep(time.Millisecond)
				default:
					other.CompareAndSwap(nil, fmt.Sprintf("%s: %v %v", name, err, rs))
				}
			}
		})
	}
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitUntil(t, "writes before the disk fills", func() bool { return ackedNow() >= 50 })
	d.full.Store(true)
	waitUntil(t, "writes refused with ErrDiskFull", func() bool { return full.Load() >= 20 })
	before := ackedNow()
	// Reads go on: an acknowledged write, and the change feed (what the
	// cache, and so the API and DNS, read). A List may fail until the
	// database is reopened: it reads the groups applied after the failed
	// sync, which it must not show.
	mu.Lock()
	var some string
	for n := range acked {
		some = n
		break
	}
	mu.Unlock()
	if _, err := s.Get(ctx, resource.Key{Kind: resource.Zone, Name: some}); err != nil {
		t.Errorf("Get on a full disk = %v", err)
	}
	if _, err := s.Changes(ctx, 0, 0); err != nil {
		t.Errorf("Changes on a full disk = %v", err)
	}
	time.Sleep(300 * time.Millisecond) // the probes fail for a while
	if n := ackedNow(); n != before {
		t.Fatalf("%d writes acknowledged while the disk was full", n-before)
	}
	d.full.Store(false)
	freed := time.Now()
	waitUntil(t, "writes acknowledged again", func() bool { return ackedNow() > before+10 })
	t.Logf("writes resumed %s after the disk had room; %d refused with ErrDiskFull", time.Since(freed).Round(time.Millisecond), full.Load())
	close(stop)
	wg.Wait()
	if e := other.Load(); e != nil {
		t.Fatalf("a write failed otherwise than with ErrDiskFull: %v", e)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(dir)
	if err != nil {
		t.Fatalf("reopen on the plain file system: %v", err)
	}
	defer s2.Close()
	objs, _, err := s2.List(ctx, resource.Zone)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, o := range objs {
		have[o.Name] = true
	}
	for name := range acked {
		if !have[name] {
			t.Errorf("acknowledged zone %s is missing after the restart", name)
		}
	}
	evs, err := s2.Changes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen, last := map[string]bool{}, int64(0)
	for _, e := range evs {
		if e.Revision <= last || seen[e.Key.String()] {
			t.Fatalf("the change feed after the restart: %s at %d after %d (seen before: %v)", e.Key, e.Revision, last, seen[e.Key.String()])
		}
		last = e.Revision
		seen[e.Key.String()] = true
		if r, ok := acked[e.Key.Name]; ok && r != e.Revision {
			t.Errorf("zone %s at revision %d, acknowledged at %d", e.Key.Name, e.Revision, r)
		}
	}
}

// TestDiskFull_RefusedBeforePebble: below the reserve of free space the
// writer refuses a group without giving it to pebble (nothing is written,
// the database is not reopened), and takes writes again once statfs shows
// room.
func TestDiskFull_RefusedBeforePebble(t *testing.T) {
	ctx := context.Background()
	d := &fullDisk{}
	s := openFull(t, t.TempDir(), d)
	defer s.Close()
	rs, err := s.Apply(ctx, zoneOp("before"))
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	rev := rs[0].Revision
	d.avail.Store(1 << 20) // 1 MiB free
	s.disk.checked.Store(0)
	_, err = s.Apply(ctx, zoneOp("refused"))
	if !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), "1048576 bytes free") {
		t.Fatalf("Apply below the reserve = %v, want ErrDiskFull saying what is free", err)
	}
	if s.revision != rev || s.synced.failure() != nil {
		t.Fatalf("the refused write reached pebble: revision %d (was %d), sync failure %v", s.revision, rev, s.synced.failure())
	}
	d.avail.Store(0)
	waitWrites(t, s, "after")
	if _, err := s.Get(ctx, resource.Key{Kind: resource.Zone, Name: "refused"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of the refused write = %v, want not found", err)
	}
}

// waitUntil polls cond for up to 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
