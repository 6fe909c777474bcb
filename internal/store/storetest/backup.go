package storetest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// ack is a write a writer saw acknowledged.
type ack struct {
	name     string
	revision int64
}

// Backup checks an embedded store's store.Backuper: writers create
// resources while the backup runs; the tar stream, extracted into a new
// directory, opens with open and holds every write acknowledged before
// Backup was called, and exactly the writes up to the revision Backup
// reports (no later one, no earlier one missing), with leases, records
// and deletions. No temporary directory is left, after a backup nor after
// one whose context was cancelled.
func Backup(t *testing.T, open func(dir string) (store.Store, error)) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, ok := s.(store.Backuper)
	if !ok {
		t.Fatalf("%T does not implement store.Backuper", s)
	}

	// Before the writers: a deleted resource, a lease and a record.
	if _, err := store.Create(ctx, s, &resource.Object{Kind: resource.Zone, Name: "gone", Spec: &resource.ZoneSpec{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Delete(ctx, s, resource.Key{Kind: resource.Zone, Name: "gone"}, 0); err != nil {
		t.Fatal(err)
	}
	lease := store.Lease{Name: "vip/MeshService/241.0.0.7", Value: []byte("web")}
	record := store.Record{Stream: "audit", Terms: []string{"name=web"}, Data: []byte(`{"verb":"create"}`)}
	if _, err := s.Apply(ctx, putLease(lease), appendRecord(record)); err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		acked   []ack
		enough  = make(chan struct{})
		stop    = make(chan struct{})
		writers sync.WaitGroup
	)
	const want = 200 // acknowledged writes before the backup starts
	for g := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", g, i)
				rs, err := s.Apply(ctx, store.Op{Type: store.OpCreate, DiscardObject: true,
					Object: &resource.Object{Kind: resource.Zone, Name: name, Spec: &resource.ZoneSpec{}}})
				if err == nil {
					err = rs[0].Err
				}
				if err != nil {
					t.Errorf("writer %d: %v", g, err)
					return
				}
				mu.Lock()
				acked = append(acked, ack{name, rs[0].Revision})
				if len(acked) == want {
					close(enough)
				}
				mu.Unlock()
			}
		}()
	}
	<-enough
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	var buf bytes.Buffer
	info, err := b.Backup(ctx, &buf)
	close(stop)
	writers.Wait()
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	mu.Lock()
	during := len(acked) - before
	mu.Unlock()
	t.Logf("%s backup at revision %d: %d bytes, files %v; %d writes acknowledged during it", info.Engine, info.Revision, buf.Len(), info.Files, during)
	assertNoBackupTemps(t, dir)

	restored := t.TempDir()
	files := extractTar(t, &buf, restored)
	if !slices.Equal(files, info.Files) {
		t.Errorf("tar holds %v, BackupInfo.Files says %v", files, info.Files)
	}
	for _, f := range files {
		if f == "LOCK" || strings.HasPrefix(f, backend.BackupTempPrefix) {
			t.Errorf("the backup holds %s", f)
		}
	}
	r, err := open(restored)
	if err != nil {
		t.Fatalf("open the restored backup: %v", err)
	}
	defer r.Close()
	objs, rev, err := r.List(ctx, resource.Zone)
	if err != nil {
		t.Fatal(err)
	}
	if rev != info.Revision {
		t.Errorf("the restored store is at revision %d, Backup said %d", rev, info.Revision)
	}
	got := map[string]int64{}
	for _, o := range objs {
		got[o.Name] = o.Revision
		if o.Revision > info.Revision {
			t.Errorf("%s has revision %d, after the backup's %d", o.Name, o.Revision, info.Revision)
		}
	}
	if _, ok := got["gone"]; ok {
		t.Error("a resource deleted before the backup is in it")
	}
	for i, a := range acked {
		_, in := got[a.name]
		switch {
		case i < before && !in:
			t.Errorf("%s (revision %d) was acknowledged before the backup and is not in it", a.name, a.revision)
		case a.revision <= info.Revision && !in:
			t.Errorf("%s (revision %d) is not in the backup at revision %d", a.name, a.revision, info.Revision)
		case a.revision > info.Revision && in:
			t.Errorf("%s (revision %d) is in the backup at revision %d", a.name, a.revision, info.Revision)
		}
	}
	if ls, err := r.Leases(ctx, "vip/"); err != nil || len(ls) != 1 || string(ls[0].Value) != "web" {
		t.Errorf("restored leases = %v, %v; want the one written before the backup", ls, err)
	}
	if rec, ok := r.(store.Recorder); ok {
		rs, err := rec.Records(ctx, store.RecordQuery{Stream: "audit", Terms: []string{"name=web"}})
		if err != nil || len(rs) != 1 {
			t.Errorf("restored records = %v, %v; want the one written before the backup", rs, err)
		}
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Backup(cancelled, io.Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("Backup with a cancelled context = %v, want context.Canceled", err)
	}
	assertNoBackupTemps(t, dir)
	// A writer that fails mid-stream fails the backup, which cleans up.
	if _, err := b.Backup(ctx, failingWriter{}); err == nil {
		t.Error("Backup to a failing writer succeeded")
	}
	assertNoBackupTemps(t, dir)

	// What a crash mid-backup leaves is removed at the next Open.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(restored, backend.BackupTempPrefix+"crashed", "pebble")
	if err := os.MkdirAll(left, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "000001.sst"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = open(restored)
	if err != nil {
		t.Fatalf("open a data dir with a crashed backup's leftovers: %v", err)
	}
	defer r.Close()
	assertNoBackupTemps(t, restored)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func assertNoBackupTemps(t *testing.T, dir string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(dir, backend.BackupTempPrefix+"*"))
	if len(left) > 0 {
		t.Errorf("temporary directories left in the data dir: %v", left)
	}
}

// extractTar writes the tar stream r into dir, as tar -xf would, and
// returns the paths it held.
func extractTar(t *testing.T, r io.Reader, dir string) []string {
	t.Helper()
	tr := tar.NewReader(r)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("read the backup: %v", err)
		}
		names = append(names, h.Name)
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("the backup holds %q, outside its directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if h.Mode != 0o700 {
				t.Errorf("%s has mode %o, want 700", h.Name, h.Mode)
			}
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if h.Mode != 0o600 {
				t.Errorf("%s has mode %o, want 600", h.Name, h.Mode)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: unexpected tar entry type %c", h.Name, h.Typeflag)
		}
	}
}
