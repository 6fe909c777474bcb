package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// RecentMatchesDatabase writes random creates, updates, status patches and
// deletes to s, some in batches, and checks that the changes served from
// the events recent keeps in memory equal those fromDB reads from the
// database, from every revision and with several limits: for backends
// that serve Changes from a backend.Recent.
func RecentMatchesDatabase(t *testing.T, s store.Store, recent *backend.Recent, fromDB func(ctx context.Context, after int64, limit int) ([]store.Event, error)) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	svc := func(i int, port int) *resource.Object {
		return &resource.Object{Kind: resource.MeshService, Mesh: "m", Name: fmt.Sprintf("s%d", i),
			Labels: map[string]string{"i": fmt.Sprint(i)}, Spec: &resource.MeshServiceSpec{Ports: []resource.Port{{Port: port}}}}
	}
	if _, err := store.Create(ctx, s, &resource.Object{Kind: resource.Mesh, Name: "m", Spec: &resource.MeshSpec{}}); err != nil {
		t.Fatal(err)
	}
	for range 300 {
		var ops []store.Op
		for range 1 + rng.IntN(3) {
			i := rng.IntN(20)
			cur, err := s.Get(ctx, resource.Key{Kind: resource.MeshService, Mesh: "m", Name: fmt.Sprintf("s%d", i)})
			switch {
			case err != nil:
				ops = append(ops, store.Op{Type: store.OpCreate, Object: svc(i, 1+rng.IntN(100))})
			case rng.IntN(4) == 0:
				ops = append(ops, store.Op{Type: store.OpDelete, Key: cur.Key()})
			case rng.IntN(2) == 0:
				next := svc(i, 1+rng.IntN(100))
				next.Version = cur.Version
				ops = append(ops, store.Op{Type: store.OpUpdate, Object: next})
			default:
				patch := svc(i, 0)
				patch.Status = &resource.ServiceStatus{VIPs: []resource.VIP{{IP: fmt.Sprintf("241.0.0.%d", rng.IntN(200)), Type: "Kuma"}}}
				ops = append(ops, store.Op{Type: store.OpPatchStatus, Object: patch, Patch: &store.StatusPatch{Fields: []string{"vips"}}, DiscardObject: rng.IntN(2) == 0})
			}
		}
		if _, err := s.Apply(ctx, ops...); err != nil {
			t.Fatal(err)
		}
	}
	_, last, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	first := recent.First()
	if first > last-100 {
		t.Fatalf("recent holds revisions from %d to %d: too few to compare", first, last)
	}
	served := 0
	for after := first - 1; after < last; after++ {
		for _, limit := range []int{1, 7, 0} {
			lim := limit
			if lim == 0 {
				lim = 1 << 30
			}
			mem, ok := recent.Changes(after, lim, nil)
			if !ok {
				t.Fatalf("changes after %d not served from memory", after)
			}
			served++
			db, err := fromDB(ctx, after, lim)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(db, mem, cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("changes after %d limit %d (-database +memory):\n%s", after, limit, d)
			}
		}
	}
	if _, ok := recent.Changes(last, 10, nil); ok {
		t.Error("changes after the last revision served from memory: another process's writes would be missed")
	}
	if _, ok := recent.Changes(first-2, 10, nil); ok {
		t.Error("changes from before the first revision kept served from memory")
	}
	t.Logf("%d reads compared, revisions %d to %d", served, first, last)
}
