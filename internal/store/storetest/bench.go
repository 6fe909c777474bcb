package storetest

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/meshnames/meshnames/internal/store"
)

// BenchApplyCreate measures sequential one-operation creates: one
// transaction, and one durable commit, per write.
func BenchApplyCreate(b *testing.B, s store.Store) {
	ctx := b.Context()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := store.Create(ctx, s, meshService(mesh, fmt.Sprintf("svc-%d", i))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchApplyCreateParallel measures one-operation creates from many
// goroutines at once, as an API server under load issues them; a store
// that groups concurrent writes into shared transactions shows it here.
func BenchApplyCreateParallel(b *testing.B, s store.Store) {
	ctx := b.Context()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64) // 64 × GOMAXPROCS concurrent writers
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := store.Create(ctx, s, meshService(mesh, fmt.Sprintf("svc-%d", i))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchApplyCreateWithRecord is BenchApplyCreateParallel with a record
// appended beside each create, depending on it, as the API does for its
// audit log (four terms: kind, mesh, name, subject): what a record adds to
// a write.
func BenchApplyCreateWithRecord(b *testing.B, s store.Store) {
	ctx := b.Context()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			name := fmt.Sprintf("svc-%d", i)
			rs, err := s.Apply(ctx, store.Op{Type: store.OpCreate, Object: meshService(mesh, name), DiscardObject: true},
				store.Op{Type: store.OpAppendRecord, DependsOn: []int{0}, Record: &store.Record{
					Stream: "audit", Terms: []string{"kind=MeshService", "mesh=" + mesh, "name=" + name, "subject=bench"},
					Data: []byte(`{"verb":"create","kind":"MeshService","mesh":"` + mesh + `","name":"` + name + `","result":"success","code":201}`),
				}})
			if err == nil {
				err = errors.Join(rs[0].Err, rs[1].Err)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// createServices creates MeshServices svc-0..svc-<n-1> in transactions
// of 1,000.
func createServices(b *testing.B, s store.Store, n int) {
	const batch = 1000
	for i := 0; i < n; i += batch {
		ops := make([]store.Op, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			ops = append(ops, store.Op{Type: store.OpCreate, Object: meshService(mesh, fmt.Sprintf("svc-%d", j)), DiscardObject: true})
		}
		rs, err := s.Apply(b.Context(), ops...)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
}

// BenchList measures a List of the whole store holding 100,000
// MeshServices, as the cache's first list at a start reads it; one op is
// one List.
func BenchList(b *testing.B, s store.Store) {
	const total = 100000
	ctx := b.Context()
	createServices(b, s, total)
	b.ReportAllocs()
	for b.Loop() {
		objs, _, err := s.List(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		if len(objs) < total {
			b.Fatalf("List = %d objects, want at least %d", len(objs), total)
		}
	}
}

// BenchChanges measures reading the change feed in pages of 1000 events
// from a store holding 10,000 resources; one op is one page.
func BenchChanges(b *testing.B, s store.Store) {
	const total, page = 10000, 1000
	ctx := b.Context()
	createServices(b, s, total)
	_, last, err := s.List(ctx, "Mesh")
	if err != nil {
		b.Fatal(err)
	}
	first := last - total
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ { // b.Loop starts the timer here, after the set-up
		after := first + int64(i%(total/page))*page
		evs, err := s.Changes(ctx, after, page)
		if err != nil {
			b.Fatal(err)
		}
		if len(evs) != page {
			b.Fatalf("Changes(%d, %d) = %d events", after, page, len(evs))
		}
	}
	b.ReportMetric(float64(b.N*page)/b.Elapsed().Seconds(), "events/s")
}

// BenchApplyPutLease measures sequential one-operation lease puts: one
// transaction, and one durable commit, per write, as a VIP allocation
// recorded on its own would cost.
func BenchApplyPutLease(b *testing.B, s store.Store) {
	ctx := b.Context()
	value := []byte(`{"kind":"MeshService","mesh":"default","name":"web"}`)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rs, err := s.Apply(ctx, store.Op{Type: store.OpPutLease,
			Lease: &store.Lease{Name: fmt.Sprintf("vip/MeshService/%d", i), Value: value}})
		if err == nil {
			err = rs[0].Err
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchLeasesPrefix measures reading 100 leases by prefix from a store
// holding 10,000 of them under 100 prefixes; one op is one read.
func BenchLeasesPrefix(b *testing.B, s store.Store) {
	const prefixes, each = 100, 100
	ctx := b.Context()
	value := []byte(`{"kind":"MeshService","mesh":"default","name":"web"}`)
	for p := range prefixes {
		ops := make([]store.Op, each)
		for j := range ops {
			ops[j] = store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: fmt.Sprintf("vip/%02d/%03d", p, j), Value: value}}
		}
		if _, err := s.Apply(ctx, ops...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		prefix := fmt.Sprintf("vip/%02d/", i%prefixes)
		ls, err := s.Leases(ctx, prefix)
		if err != nil {
			b.Fatal(err)
		}
		if len(ls) != each {
			b.Fatalf("Leases(%q) = %d leases, want %d", prefix, len(ls), each)
		}
	}
	b.ReportMetric(float64(b.N*each)/b.Elapsed().Seconds(), "leases/s")
}
