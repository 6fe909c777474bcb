package dnsserver

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestCowMap_EditsLeaveEarlierVersionsAlone checks a cowMap against a plain
// map through many edits that grow it past several reshardings and shrink
// it again: each version keeps exactly the keys it had when it was made,
// whatever the edits after it did, and Put returns what a key held.
func TestCowMap_EditsLeaveEarlierVersionsAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type version struct {
		m    cowMap[string, int]
		want map[string]int
	}
	cur := newCowMap[string, int](hashString)
	model := map[string]int{}
	var versions []version
	for round := range 60 {
		ed := cur.edit()
		// Grow for 40 rounds (to about 20,000 keys), then shrink.
		n := 1 + rng.IntN(1000)
		for range n {
			k := fmt.Sprintf("k%d", rng.IntN(30000))
			if round < 40 || rng.IntN(4) == 0 {
				// Put returns what the key held before (the first round's
				// edit is of an empty map: its base directly).
				before, had := model[k]
				if prev, ok := ed.Put(k, round); prev != before || ok != had {
					t.Fatalf("round %d: Put(%s) returned %d, %v; it held %d, %v", round, k, prev, ok, before, had)
				}
				model[k] = round
			} else {
				ed.Delete(k)
				delete(model, k)
			}
			want, wantOK := model[k]
			if v, ok := ed.Get(k); v != want || ok != wantOK {
				t.Fatalf("round %d: the edit's Get(%s) = %d, %v; want %d, %v", round, k, v, ok, want, wantOK)
			}
		}
		cur = ed.done()
		versions = append(versions, version{cur, maps.Clone(model)})
	}
	if cur.base.shards <= minShards {
		t.Fatalf("the map never resharded: %d shards for up to %d keys", cur.base.shards, len(versions[39].want))
	}
	for i, v := range versions {
		if v.m.Len() != len(v.want) {
			t.Fatalf("version %d: Len %d, want %d", i, v.m.Len(), len(v.want))
		}
		got := map[string]int{}
		for k, x := range v.m.All() {
			got[k] = x
			if y, ok := v.m.Get(k); !ok || y != x {
				t.Fatalf("version %d: Get(%s) = %d, %v; All gave %d", i, k, y, ok, x)
			}
		}
		if !maps.Equal(got, v.want) {
			t.Fatalf("version %d holds %d keys, want %d (or different values)", i, len(got), len(v.want))
		}
		if _, ok := v.m.Get("absent"); ok {
			t.Fatalf("version %d has a key never set", i)
		}
	}
}

// TestShardMap_ShardsFollowSize pins how many shards a map of n keys ends up
// with: few for a small mesh, about shardKeys keys per shard for a large one.
func TestShardMap_ShardsFollowSize(t *testing.T) {
	// The fewest shards, a power of two, that hold n keys at shardKeys each.
	fit := func(n int) int {
		s := minShards
		for s*shardKeys < n {
			s *= 2
		}
		return s
	}
	for _, tc := range []struct{ n, shards int }{
		{0, minShards}, {10, minShards}, {shardKeys * minShards, minShards}, {shardKeys*minShards + 1, 2 * minShards},
		{100_000, fit(100_000)},
	} {
		ed := newShardMap[int, struct{}](func(k int) uint64 { return uint64(k) * 0x9e3779b97f4a7c15 }).edit()
		for i := range tc.n {
			ed.Set(i, struct{}{})
		}
		if got := ed.done().shards; got != tc.shards {
			t.Errorf("%d keys: %d shards, want %d", tc.n, got, tc.shards)
		}
	}
}

// TestShardMap_ConsecutiveAddressesShareShards pins what hashAddr is for: a
// batch of consecutive VIPs (how the allocator gives them out) clones
// about one shard per addrBlock of them, not one per address.
func TestShardMap_ConsecutiveAddressesShareShards(t *testing.T) {
	for _, base := range []string{"240.0.0.0", "fd00::"} {
		next := netip.MustParseAddr(base)
		add := func(ed *shardEdit[netip.Addr, int], n int) {
			for range n {
				ed.Set(next, 0)
				next = next.Next()
			}
		}
		ed := newShardMap[netip.Addr, int](hashAddr).edit()
		add(ed, 10_000)
		m := ed.done()
		const batch = 500
		ed = m.edit()
		add(ed, batch)
		if owned, most := ed.cloned(), batch/addrBlock+2; owned > most {
			t.Errorf("%s: %d consecutive addresses cloned %d of %d shards, want at most %d", base, batch, owned, ed.shards, most)
		}
		if got := ed.done().Len(); got != 10_000+batch {
			t.Errorf("%s: %d keys, want %d", base, got, 10_000+batch)
		}
	}
}

// TestShardMap_OneChangeCopiesOnePage pins what the pages are for: a change
// of one key in a large map clones that key's shard and the page holding
// it, and shares every other page with the map it was made from.
func TestShardMap_OneChangeCopiesOnePage(t *testing.T) {
	ed := newShardMap[int, int](func(k int) uint64 { return uint64(k) * 0x9e3779b97f4a7c15 }).edit()
	for i := range 100_000 {
		ed.Set(i, i)
	}
	m := ed.done()
	if len(m.pages) < 2 {
		t.Fatalf("%d keys in %d shards on %d pages; want several pages", m.Len(), m.shards, len(m.pages))
	}
	ed = m.edit()
	ed.Set(7, -7)
	next := ed.done()
	if got := ed.cloned(); got != 1 {
		t.Errorf("one change cloned %d shards, want 1", got)
	}
	copied := 0
	for p := range m.pages {
		if &m.pages[p][0] != &next.pages[p][0] {
			copied++
		}
	}
	if copied != 1 {
		t.Errorf("one change copied %d of %d pages, want 1", copied, len(m.pages))
	}
	if v, _ := m.Get(7); v != 7 {
		t.Errorf("the earlier map's key 7 = %d after the edit, want 7", v)
	}
	if v, _ := next.Get(7); v != -7 {
		t.Errorf("the edited map's key 7 = %d, want -7", v)
	}
}

// TestCowMap_BatchesChangeTheDeltaThenMerge pins what the delta is for:
// batches of changes to a large map clone shards of the delta only, and
// leave the base (every page of it) to the map they were made from, until
// the delta outgrows mergeAt and is written into a new base.
func TestCowMap_BatchesChangeTheDeltaThenMerge(t *testing.T) {
	hash := func(k int) uint64 { return uint64(k) * 0x9e3779b97f4a7c15 }
	const n, batch = 100_000, 2_000
	model := map[int]int{}
	ed := newCowMap[int, int](hash).edit()
	for i := range n {
		ed.Set(i, i)
		model[i] = i
	}
	m := ed.done()
	if m.delta.Len() != 0 || m.base.Len() != n {
		t.Fatalf("a first edit of %d keys left %d in the delta and %d in the base; want all merged", n, m.delta.Len(), m.base.Len())
	}
	next, changed := n, 0
	for b := 0; m.delta.Len() > 0 || b == 0; b++ {
		if b > n/batch {
			t.Fatalf("the delta never merged: %d keys after %d batches", m.delta.Len(), b)
		}
		prev := m
		ed := m.edit()
		for range batch / 2 { // new keys, changes and deletions of old ones
			ed.Set(next, next)
			model[next] = next
			if k := next - n; k%2 == 0 {
				ed.Set(k, -k)
				model[k] = -k
			} else {
				ed.Delete(k)
				delete(model, k)
			}
			next++
		}
		changed += batch
		m = ed.done()
		if m.delta.Len() == 0 {
			if changed <= mergeAt(m.Len()) {
				t.Fatalf("the delta merged after %d changes, not past mergeAt (%d)", changed, mergeAt(m.Len()))
			}
			break
		}
		for p := range prev.base.pages {
			if &prev.base.pages[p][0] != &m.base.pages[p][0] {
				t.Fatalf("batch %d copied page %d of the base", b, p)
			}
		}
	}
	if m.Len() != len(model) || m.base.Len() != len(model) {
		t.Fatalf("after the merge Len %d, the base %d keys; want %d", m.Len(), m.base.Len(), len(model))
	}
	if got := maps.Collect(m.All()); !maps.Equal(got, model) {
		t.Fatalf("after the merge the map holds %d keys, want %d (or different values)", len(got), len(model))
	}
}
