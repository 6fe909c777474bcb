package cache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// ages returns the stored times of cands, sorted.
func ages(cands []candidate) []int64 {
	out := make([]int64, len(cands))
	for i, cd := range cands {
		out[i] = cd.at
	}
	slices.Sort(out)
	return out
}

// The freezer leaves hot the candidates newer than the cutoff
// (partitionNewer) and, over the bound, only the newest of them
// (newestLast): exactly those, moved to the end, ties included.
func TestFreezeOrder_KeepsTheNewest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		n, spread int // candidates, distinct times (few: many ties)
	}{{1, 1}, {2, 1}, {10, 3}, {100, 100}, {1000, 7}, {1000, 1000}, {5000, 2}} {
		for _, keep := range []int{1, tc.n / 3, tc.n / 2, tc.n} {
			if keep < 1 {
				continue
			}
			t.Run(fmt.Sprintf("n=%d,times=%d,keep=%d", tc.n, tc.spread, keep), func(t *testing.T) {
				cands := make([]candidate, tc.n)
				for i := range cands {
					cands[i] = candidate{name: fmt.Sprint(i), at: int64(rng.IntN(tc.spread))}
				}
				all := ages(cands)
				names := map[string]bool{}
				for _, cd := range cands {
					names[cd.name] = true
				}
				cutoff := all[tc.n/2]
				newer := partitionNewer(cands, cutoff)
				for i, cd := range cands {
					if (i >= tc.n-newer) != (cd.at > cutoff) {
						t.Fatalf("partitionNewer(cutoff %d) = %d: candidate %d at %d on the wrong side", cutoff, newer, i, cd.at)
					}
				}
				newestLast(cands, keep)
				if got, want := ages(cands[tc.n-keep:]), all[tc.n-keep:]; !slices.Equal(got, want) {
					t.Fatalf("newestLast kept %v, want %v", got, want)
				}
				for _, cd := range cands {
					delete(names, cd.name)
				}
				if len(names) != 0 {
					t.Fatalf("candidates lost: %v", names)
				}
			})
		}
	}
}
