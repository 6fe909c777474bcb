package pebble

import (
	"math/rand/v2"
	"testing"
)

// TestKnownKeys holds the set to a map of what was added: never absent
// before a List made it complete, then absent exactly for what was
// neither listed nor written, across the merges of written hashes.
func TestKnownKeys(t *testing.T) {
	for _, tt := range []struct {
		name            string
		before, listed  int // hashes written before the List, and listed
		after           int // written after
		overlapsWritten bool
	}{
		{name: "empty store", after: 10},
		{name: "listed only", listed: 1000},
		{name: "written before and listed", before: 500, listed: 3000, overlapsWritten: true},
		{name: "many merges after", listed: 20000, after: 50000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tt.listed)))
			var k knownKeys
			model := map[uint64]bool{}
			for range tt.before {
				h := r.Uint64()
				k.add(h)
				model[h] = true
				if k.absent(h) || k.absent(r.Uint64()) {
					t.Fatal("absent before the set is complete")
				}
			}
			var hs []uint64
			for i := range tt.listed {
				h := r.Uint64()
				if tt.overlapsWritten && i < tt.before {
					for w := range model { // a listed key the writer wrote too
						h = w
						break
					}
				}
				hs = append(hs, h)
				model[h] = true
			}
			k.listed(hs)
			for range tt.after {
				h := r.Uint64()
				k.add(h)
				model[h] = true
			}
			for h := range model {
				if k.absent(h) {
					t.Fatalf("hash %x written or listed reads absent", h)
				}
			}
			for range 10000 {
				if h := r.Uint64(); !model[h] && !k.absent(h) {
					t.Fatalf("hash %x never written reads present", h)
				}
			}
			if len(k.sorted)+len(k.recent) < len(model) {
				t.Errorf("holds %d+%d hashes, want at least %d", len(k.sorted), len(k.recent), len(model))
			}
		})
	}
}
