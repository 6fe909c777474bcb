package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
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

// TestConformance_Listed runs the suite on stores that listed every kind
// at every open, as the cache does at start: their writes then trust the
// set of known keys (known.go) to skip looking for rows of new keys.
func TestConformance_Listed(t *testing.T) {
	storetest.Run(t, func(tb testing.TB, now func() time.Time) (store.Store, func() store.Store) {
		tb.Helper()
		dir := tb.TempDir()
		reopen := func() store.Store {
			s := openIn(tb, dir, pebble.WithClock(now))
			if _, _, err := s.List(context.Background(), ""); err != nil {
				tb.Fatalf("List = %v", err)
			}
			return s
		}
		return reopen(), reopen
	})
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

func BenchmarkList(b *testing.B) {
	storetest.BenchList(b, openIn(b, b.TempDir()))
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

// TestFlushMemory: FlushMemory writes the memtable out to a table file
// (what the server does once a burst of writes is over), every write
// stays readable, across a reopen too, and after Close it reports
// ErrClosed.
func TestFlushMemory(t *testing.T) {
	dir := t.TempDir()
	s := openIn(t, dir)
	ctx := t.Context()
	const n = 300
	for i := range n {
		o := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("svc-%d", i),
			Spec: &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 80, AppProtocol: resource.ProtocolHTTP}}}}
		if _, err := store.Create(ctx, s, o); err != nil {
			t.Fatal(err)
		}
	}
	tables := func() int {
		m, err := filepath.Glob(filepath.Join(dir, pebble.Dir, "*.sst"))
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}
	before := tables()
	if err := s.FlushMemory(); err != nil {
		t.Fatalf("FlushMemory = %v", err)
	}
	if after := tables(); after <= before {
		t.Fatalf("FlushMemory wrote no table file: %d before, %d after", before, after)
	}
	check := func(s store.Store, when string) {
		objs, _, err := s.List(ctx, resource.MeshService)
		if err != nil || len(objs) != n {
			t.Fatalf("%s: List = %d objects, %v; want %d", when, len(objs), err, n)
		}
	}
	check(s, "after FlushMemory")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushMemory(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("FlushMemory after Close = %v, want ErrClosed", err)
	}
	check(openIn(t, dir), "after a reopen")
}

// BenchmarkApplyNamingBatches stores services as a zone stores those an
// initial sync sends it: a thousand an Apply, each created named (with a
// status) beside its VIP's lease and its history record (three terms).
// One op is one batch of 1,000 services.
func BenchmarkApplyNamingBatches(b *testing.B) {
	s := openIn(b, b.TempDir())
	ctx := b.Context()
	// A List of every kind, as the cache makes at a start, lets a create
	// skip looking for a row.
	if _, _, err := s.List(ctx, ""); err != nil {
		b.Fatal(err)
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		ops := make([]store.Op, 0, 3000)
		for range 1000 {
			n++
			name := fmt.Sprintf("svc-%d-5c8f2a7d9e1b3c4d", n)
			ip := fmt.Sprintf("241.%d.%d.%d", n>>16&255, n>>8&255, n&255)
			at := len(ops)
			ops = append(ops,
				store.Op{Type: store.OpCreate, DiscardObject: true, Object: &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: name,
					Labels: map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelZone: "east", resource.LabelDisplayName: name[:len(name)-17]},
					Spec: &resource.MeshServiceSpec{Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{resource.TagService: name}},
						Ports: []resource.Port{{Port: 80, AppProtocol: resource.ProtocolHTTP}}},
					Status: &resource.ServiceStatus{VIPs: []resource.VIP{{IP: ip, Type: resource.VIPKuma}},
						Addresses: []resource.Address{{Hostname: name + ".svc.east.mesh.local", Status: resource.AddressAvailable}}}}},
				store.Op{Type: store.OpPutLease, DependsOn: []int{at}, Lease: &store.Lease{Name: "vip/" + ip, Value: []byte(`{"owner":"MeshService/default/` + name + `"}`)}},
				store.Op{Type: store.OpAppendRecord, DependsOn: []int{at}, Record: &store.Record{Stream: "history",
					Terms: []string{"vip=" + ip, "hostname=" + name + ".svc.east.mesh.local"},
					Data:  []byte(`[{"seq":0,"time":"0001-01-01T00:00:00Z","zone":"west","mesh":"default","kind":"MeshService","name":"` + name + `","event":"assigned"}]`)}})
		}
		rs, err := s.Apply(ctx, ops...)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(n), "us/service")
}
