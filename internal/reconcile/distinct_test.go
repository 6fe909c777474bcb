package reconcile

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
)

// distinct gives every key once, in key order, however long the list and
// however many times a key comes (every core marks a created service).
func TestTerm_Distinct(t *testing.T) {
	var tm term
	for _, n := range []int{0, 1, 5, 63, 64, 1000, 3 * keepPending} {
		for _, copies := range []int{1, 5} {
			var keys []resource.Key
			for c := range copies {
				for i := range n {
					// Descending, and each copy of a key in another place.
					j := (i + c*7) % max(n, 1)
					keys = append(keys, resource.Key{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("svc-%06d", n-j)})
				}
			}
			want := slices.Clone(keys)
			slices.SortFunc(want, compareKeys)
			want = slices.Compact(want)
			if got := tm.distinct(keys); !slices.Equal(got, want) {
				t.Fatalf("n=%d copies=%d: distinct gave %d keys, want %d in order", n, copies, len(got), len(want))
			}
			if len(tm.uniq) != 0 {
				t.Fatalf("n=%d copies=%d: the set keeps %d keys after", n, copies, len(tm.uniq))
			}
		}
	}
}

// BenchmarkTerm_Distinct is a create pass's keys: 1,000 services, each
// marked dirty by five cores.
func BenchmarkTerm_Distinct(b *testing.B) {
	var src []resource.Key
	for range 5 {
		for i := range 1000 {
			src = append(src, resource.Key{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("svc-%d-5c8f2a7d9e1b3c4d", i)})
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(src), func(i, j int) { src[i], src[j] = src[j], src[i] })
	keys := make([]resource.Key, len(src))
	var tm term
	b.ReportAllocs()
	for b.Loop() {
		copy(keys, src)
		if got := tm.distinct(keys); len(got) != 1000 {
			b.Fatalf("%d keys, want 1000", len(got))
		}
	}
}
