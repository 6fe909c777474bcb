package pebble

import (
	"hash/maphash"
	"slices"
	"sync"
)

// knownKeys holds the hashes of every object key the database has a row
// for (live or tombstone), once a List of every kind has read them all, so
// that a write of a key that has no row (a create) need not look for one.
// That look is a point read through every level of the tree, its bloom
// filters read from the files again whenever the small block cache lost
// them: 14% of a zone's CPU while an initial sync created 90,000 synced
// services (docs/performance.md).
//
// It is complete only after such a List (the cache makes one at every
// start), which adds what its snapshot held; the writer adds every key it
// writes, before and after, so the set then holds at least every key with
// a row. Rows purged later (Compact) leave their hash behind, which only
// makes a write of that key read the database as before; so does a hash
// that collides.
//
// The hashes live in a sorted slice (8 bytes a key: 0.8 MB at 100,000)
// and, as they are written, in a small map merged into it from time to
// time.
type knownKeys struct {
	mu       sync.Mutex
	complete bool
	sorted   []uint64
	recent   map[uint64]struct{}
}

// keySeed hashes object keys for knownKeys and freshKeys.
var keySeed = maphash.MakeSeed()

func hashKey(okey []byte) uint64 { return maphash.Bytes(keySeed, okey) }

// minMerge is how many recent hashes wait before they are merged into the
// sorted slice, at least (an eighth of the slice, at most).
const minMerge = 4096

// add records a key written.
func (k *knownKeys) add(h uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.recent == nil {
		k.recent = make(map[uint64]struct{}, minMerge)
	}
	k.recent[h] = struct{}{}
	if len(k.recent) >= max(minMerge, len(k.sorted)/8) {
		hs := make([]uint64, 0, len(k.recent))
		for h := range k.recent {
			hs = append(hs, h)
		}
		k.merge(hs)
		k.recent = nil
	}
}

// absent reports whether the database certainly holds no row with this
// hash.
func (k *knownKeys) absent(h uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.complete {
		return false
	}
	if _, ok := k.recent[h]; ok {
		return false
	}
	_, found := slices.BinarySearch(k.sorted, h)
	return !found
}

// listed adds the hashes of every object key of a snapshot and makes the
// set complete. hs is the caller's no longer.
func (k *knownKeys) listed(hs []uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.merge(hs)
	k.complete = true
}

// merge adds hs to the sorted slice (hs is reordered).
func (k *knownKeys) merge(hs []uint64) {
	slices.Sort(hs)
	out := make([]uint64, 0, len(k.sorted)+len(hs))
	a, b := k.sorted, hs
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	out = append(append(out, a...), b...)
	k.sorted = slices.Compact(out)
}
