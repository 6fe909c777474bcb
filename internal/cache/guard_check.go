package cache

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sync"

	"github.com/meshnames/meshnames/internal/resource"
)

// Peek and Scan hand out the cache's own decoded objects, which nobody may
// modify: a reader that did would change what every other reader sees and
// what the cache freezes. Go cannot forbid it, so in race builds (the test
// suite: guardShared) the cache fingerprints every object it holds decoded
// and checks the fingerprint each time it hands the object out, replaces
// it, or freezes it, failing loudly at the first modification. Production
// builds keep no fingerprint and check nothing.
type guards struct {
	mu   sync.Mutex
	sums map[*resource.Object]uint64
}

var guardSeed = maphash.MakeSeed()

// fingerprint is a digest of everything of o a reader could modify.
func fingerprint(o *resource.Object) uint64 {
	var h maphash.Hash
	h.SetSeed(guardSeed)
	b, _ := json.Marshal(o) // a resource always encodes
	h.Write(b)
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		h.WriteString(k)
		h.WriteString(o.Labels[k])
	}
	return h.Sum64()
}

// track starts guarding o, which the cache now holds decoded.
func (g *guards) track(o *resource.Object) {
	if !guardShared || o == nil {
		return
	}
	sum := fingerprint(o)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sums == nil {
		g.sums = map[*resource.Object]uint64{}
	}
	g.sums[o] = sum
}

// check fails if o, which the cache holds decoded, was modified; drop
// stops guarding it (it is replaced, removed or frozen).
func (g *guards) check(o *resource.Object, drop bool) {
	if !guardShared || o == nil {
		return
	}
	sum := fingerprint(o)
	g.mu.Lock()
	want, ok := g.sums[o]
	if drop {
		delete(g.sums, o)
	}
	g.mu.Unlock()
	if ok && sum != want {
		panic(fmt.Sprintf("cache: %s was modified after the cache handed it out shared (Peek, Scan): readers must clone it first", o.Key()))
	}
}

// reset forgets every fingerprint (a relist replaced every entry).
func (g *guards) reset() {
	if !guardShared {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.sums)
}
