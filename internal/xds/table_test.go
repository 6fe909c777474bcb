package xds

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
)

// TestTable_SortedAndWildcardSets drives a table through services created,
// changed, relabelled and deleted, and checks after each step that its
// kept orders and shared wildcard sets are what a stream computing alone
// would send: every resource in name order, and the non-API ones with
// their response version.
func TestTable_SortedAndWildcardSets(t *testing.T) {
	tbl := newMeshTable()
	rng := rand.New(rand.NewPCG(1, 2))
	render := func(i, rev int) (resource.Key, map[string]string, []Resource) {
		k, _, rs := benchService(i)
		labels := map[string]string{"rev": fmt.Sprint(rev % 3)}
		if rev%2 == 1 { // another endpoint: a new load assignment
			_, _, rs2 := benchService(i + 1000)
			for j := range rs {
				if rs[j].Type == EndpointType {
					rs[j].Msg = rs2[j].Msg
				}
			}
		}
		if rev%5 == 4 { // no VIP: no outbound listener
			rs = slices.DeleteFunc(rs, func(r Resource) bool { return r.Type == ListenerType && !r.API })
		}
		return k, labels, rs
	}
	for step := range 400 {
		i := rng.IntN(40)
		switch rng.IntN(4) {
		case 0:
			tbl.put(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("svc-%06d", i)}, nil, nil)
		default:
			tbl.put(render(i, rng.IntN(10)))
		}
		if step%3 != 0 {
			continue // let some changes pile up between reads
		}
		for typ := range numTypes {
			var want []*entry
			var wantPlain []sent
			for _, e := range tbl.res[typ] {
				want = append(want, e)
				if !e.api {
					wantPlain = append(wantPlain, sent{e.name, e.version, e.any, entrySum(e.name, e.version)})
				}
			}
			slices.SortFunc(want, func(a, b *entry) int { return strings.Compare(a.name, b.name) })
			slices.SortFunc(wantPlain, func(a, b sent) int { return strings.Compare(a.name, b.name) })
			if got := tbl.sortedEntries(typ); !slices.Equal(got, want) {
				t.Fatalf("step %d: %s sorted entries differ from the table's", step, typ)
			}
			w := tbl.wildcardSet(typ, false)
			if !slices.Equal(w.resources, wantPlain) {
				t.Fatalf("step %d: %s wildcard set differs from the table's", step, typ)
			}
			if v := responseVersion(wantPlain, nil); w.version != v {
				t.Fatalf("step %d: %s wildcard set version %s, want %s", step, typ, w.version, v)
			}
		}
	}
}
