package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// leaderLease is the lease the fence tests hold: expiries are compared
// with the database's clock, not the suite's fake one, so they are set
// from the real time, an hour away.
func leaderLease(f store.Fence, expires time.Time) store.Lease {
	return store.Lease{Name: f.Lease, Value: f.LeaseValue(), ExpiresAt: expires}
}

// testFence writes a status and a lease under a fence against each state of
// the lease: only a current fence writes; any other fails the whole batch
// with ErrFenced and changes nothing (no status, no lease, no revision).
func testFence(t *testing.T, e *env) {
	cur := store.Fence{Lease: "leader", Holder: "a", Term: 3}
	hour := time.Now().Add(time.Hour)
	tests := []struct {
		name  string
		lease *store.Lease // nil: no lease
		fence store.Fence
		want  error
	}{
		{"Current", &store.Lease{Name: "leader", Value: cur.LeaseValue(), ExpiresAt: hour}, cur, nil},
		{"CurrentNeverExpires", &store.Lease{Name: "leader", Value: cur.LeaseValue()}, cur, nil},
		{"StaleTerm", ptr(leaderLease(store.Fence{Lease: "leader", Holder: "a", Term: 4}, hour)), cur, store.ErrFenced},
		{"OtherHolder", ptr(leaderLease(store.Fence{Lease: "leader", Holder: "b", Term: 3}, hour)), cur, store.ErrFenced},
		{"Expired", ptr(leaderLease(cur, time.Now().Add(-time.Minute))), cur, store.ErrFenced},
		{"NoLease", nil, cur, store.ErrFenced},
		{"OtherLeaseName", ptr(leaderLease(store.Fence{Lease: "leader-2", Holder: "a", Term: 3}, hour)), cur, store.ErrFenced},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "web-" + string(rune('a'+i))
			svc := e.create(t, meshService(mesh, name))
			if tc.lease != nil {
				e.applyOK(t, putLease(*tc.lease))
				defer e.applyOK(t, deleteLease(tc.lease.Name))
			}
			before := e.leases(t, "")
			_, revBefore, err := e.s.List(e.ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			upd := svc.Clone()
			upd.Status = serviceStatus(name + ".mesh")
			written := store.Lease{Name: "vip/" + name, Value: []byte("x")}
			rs, err := e.s.Apply(store.WithFence(e.ctx, tc.fence), store.Op{Type: store.OpUpdateStatus, Object: upd}, putLease(written))
			if tc.want == nil {
				if err != nil || len(rs) != 2 || rs[0].Err != nil || rs[1].Err != nil {
					t.Fatalf("fenced Apply with a current fence = %v, %v; want success", rs, err)
				}
				if got := e.get(t, svc.Key()); got.Version != 2 {
					t.Errorf("version after the fenced write = %d, want 2", got.Version)
				}
				e.applyOK(t, deleteLease(written.Name))
				return
			}
			if !errors.Is(err, tc.want) || rs != nil {
				t.Fatalf("fenced Apply = %v, %v; want no results and %v", rs, err, tc.want)
			}
			if diff := cmp.Diff(svc, e.get(t, svc.Key())); diff != "" {
				t.Errorf("a rejected fenced write changed the service (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(before, e.leases(t, ""), leaseOpts); diff != "" {
				t.Errorf("a rejected fenced write changed the leases (-before +after):\n%s", diff)
			}
			if _, rev, err := e.s.List(e.ctx, ""); err != nil || rev != revBefore {
				t.Errorf("revision after a rejected fenced write = %d, %v; want %d", rev, err, revBefore)
			}
		})
	}
}

// testFenceRejectsOnlyItsBatch sends fenced and unfenced batches together:
// the stale fenced ones fail, every other batch is written.
func testFenceRejectsOnlyItsBatch(t *testing.T, e *env) {
	cur := store.Fence{Lease: "leader", Holder: "b", Term: 2}
	stale := store.Fence{Lease: "leader", Holder: "a", Term: 1}
	e.applyOK(t, putLease(leaderLease(cur, time.Now().Add(time.Hour))))
	const n = 20
	fences := []*store.Fence{nil, &cur, &stale}
	errs := make(chan error, len(fences)*n)
	for i := range n {
		for j, f := range fences {
			go func() {
				ctx := e.ctx
				if f != nil {
					ctx = store.WithFence(ctx, *f)
				}
				name := fmt.Sprintf("svc-%d-%d", j, i)
				rs, err := e.s.Apply(ctx, store.Op{Type: store.OpCreate, Object: meshService(mesh, name)})
				switch {
				case f == &stale && !errors.Is(err, store.ErrFenced):
					errs <- fmt.Errorf("%s: a stale fence was not rejected: %v", name, err)
				case f != &stale && (err != nil || rs[0].Err != nil):
					errs <- fmt.Errorf("%s: write failed beside a rejected fenced batch: %v, %v", name, err, rs)
				default:
					errs <- nil
				}
			}()
		}
	}
	for range len(fences) * n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	objs, _, err := e.s.List(e.ctx, resource.MeshService)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2*n {
		t.Errorf("%d services stored, want %d (the unfenced and currently fenced ones)", len(objs), 2*n)
	}
}

func ptr[T any](v T) *T { return &v }
