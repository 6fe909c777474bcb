package dnsserver

import (
	"hash/maphash"
	"iter"
	"maps"
	"math/bits"
	"net/netip"
	"slices"

	"github.com/meshnames/meshnames/internal/resource"
)

// A cowMap spreads its keys over a power of two of shards, at most
// shardKeys keys each on average: a change clones only the shards it
// touches, so a rebuild of a few hundred changes at 100,000 names clones
// a fifth of the table rather than nearly half of it (with a fixed 1,024
// shards, naming 100,000 services at start cloned 600 MB), and a small
// map keeps few. Smaller shards clone less per batch but cost memory: 16
// keys a shard took naming 100,000 in batches of 500
// (BenchmarkNameInBatches) from 368 to 241 MB and 0.85 to 0.58 s, and
// added about 90 bytes of RSS per service after a restart
// (BenchmarkIdle, 1,930-1,940 B against 2,003-2,062 B), each of the
// maps of 8,192 small shards carrying its own slack; so 64.
const (
	shardKeys = 64
	minShards = 16
	maxShards = 1 << 16
)

var hashSeed = maphash.MakeSeed()

func hashString(s string) uint64 { return maphash.String(hashSeed, s) }

func hashKey(k resource.Key) uint64 {
	return maphash.String(hashSeed, string(k.Kind)+"/"+k.Mesh+"/"+k.Name)
}

// hashAddr hashes the block of addrBlock consecutive addresses a is in,
// so that a block shares a shard: VIPs are given out in order, and the
// few hundred a batch of new services gets then touch a few shards
// instead of one each (with a hash per address, the reverse map's clones
// were 6.5% of what a zone allocated through a 10 x 10,000 initial sync).
// A block is no larger than the average shard (shardKeys).
func hashAddr(a netip.Addr) uint64 {
	b := a.As16()
	b[15] &^= addrBlock - 1
	return maphash.Bytes(hashSeed, b[:])
}

// addrBlock is the number of consecutive addresses hashAddr keeps in one
// shard: a power of two, at most shardKeys.
const addrBlock = shardKeys

// cowMap is an immutable map split into shards. Readers use it without
// locks; a writer derives a new one with edit, which clones a shard the
// first time it changes it, so a change costs the size of the shards it
// touches rather than of the whole map. The number of shards grows with
// the map (done).
//
// The shards are held in pages of at most pageShards, and an edit clones
// the list of pages and then only the pages it touches: a change of one
// service at 100,000 names copied the 2,048 shard pointers of each of its
// maps (60 KB a change with the bookkeeping) when they were one slice.
type cowMap[K comparable, V any] struct {
	pages  [][]map[K]V // every page holds min(shards, pageShards) shards
	shards int         // a power of two
	n      int
	hash   func(K) uint64
}

// pageShards is the most shards one page holds: a power of two, so that
// a shard's page and place are bits of its index, and 64 so that an
// edit's record of the shards it owns in a page is one word.
const (
	pageBits   = 6
	pageShards = 1 << pageBits
)

func newCowMap[K comparable, V any](hash func(K) uint64) cowMap[K, V] {
	return cowMap[K, V]{pages: newPages[K, V](minShards), shards: minShards, hash: hash}
}

// newPages returns the empty pages of a map of shards shards.
func newPages[K comparable, V any](shards int) [][]map[K]V {
	per := min(shards, pageShards)
	pages := make([][]map[K]V, shards/per)
	for i := range pages {
		pages[i] = make([]map[K]V, per)
	}
	return pages
}

// Get returns the value of k.
func (c cowMap[K, V]) Get(k K) (V, bool) {
	i := c.hash(k) & uint64(c.shards-1)
	v, ok := c.pages[i>>pageBits][i&(pageShards-1)][k]
	return v, ok
}

// Len returns the number of keys.
func (c cowMap[K, V]) Len() int { return c.n }

// All yields every key and value, in no particular order.
func (c cowMap[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, p := range c.pages {
			for _, s := range p {
				for k, v := range s {
					if !yield(k, v) {
						return
					}
				}
			}
		}
	}
}

// cowEdit is a change being made to a cowMap; the original is unchanged.
type cowEdit[K comparable, V any] struct {
	pages [][]map[K]V
	// owned has a bit for each shard of a page that this edit cloned; a
	// page with any is the edit's own copy too.
	owned  []uint64
	shards int
	n      int
	hash   func(K) uint64
}

func (c cowMap[K, V]) edit() *cowEdit[K, V] {
	return &cowEdit[K, V]{pages: slices.Clone(c.pages), owned: make([]uint64, len(c.pages)), shards: c.shards, n: c.n, hash: c.hash}
}

func (e *cowEdit[K, V]) shard(k K) int { return int(e.hash(k) & uint64(e.shards-1)) }

func (e *cowEdit[K, V]) at(i int) map[K]V { return e.pages[i>>pageBits][i&(pageShards-1)] }

func (e *cowEdit[K, V]) own(i int) map[K]V {
	p, bit := i>>pageBits, uint64(1)<<(i&(pageShards-1))
	if e.owned[p]&bit == 0 {
		if e.owned[p] == 0 {
			e.pages[p] = slices.Clone(e.pages[p])
		}
		page := e.pages[p]
		if s := page[i&(pageShards-1)]; s == nil {
			page[i&(pageShards-1)] = map[K]V{}
		} else {
			page[i&(pageShards-1)] = maps.Clone(s)
		}
		e.owned[p] |= bit
	}
	return e.at(i)
}

// cloned returns how many shards the edit has cloned.
func (e *cowEdit[K, V]) cloned() int {
	n := 0
	for _, w := range e.owned {
		n += bits.OnesCount64(w)
	}
	return n
}

func (e *cowEdit[K, V]) Get(k K) (V, bool) {
	v, ok := e.at(e.shard(k))[k]
	return v, ok
}

func (e *cowEdit[K, V]) Set(k K, v V) {
	s := e.own(e.shard(k))
	if _, had := s[k]; !had {
		e.n++
	}
	s[k] = v
}

func (e *cowEdit[K, V]) Delete(k K) {
	i := e.shard(k)
	if _, had := e.at(i)[k]; !had {
		return
	}
	delete(e.own(i), k)
	e.n--
}

// done returns the edited map, spread over more shards when it outgrew
// them (every key moves once per doubling, so growing to n keys moves
// each about once on average). The edit must not be used afterwards.
func (e *cowEdit[K, V]) done() cowMap[K, V] {
	want := e.shards
	for want < maxShards && e.n > shardKeys*want {
		want *= 2
	}
	if want == e.shards {
		return cowMap[K, V]{pages: e.pages, shards: e.shards, n: e.n, hash: e.hash}
	}
	pages := newPages[K, V](want)
	mask := uint64(want - 1)
	for _, p := range e.pages {
		for _, s := range p {
			for k, v := range s {
				i := e.hash(k) & mask
				page := pages[i>>pageBits]
				if page[i&(pageShards-1)] == nil {
					page[i&(pageShards-1)] = map[K]V{}
				}
				page[i&(pageShards-1)][k] = v
			}
		}
	}
	return cowMap[K, V]{pages: pages, shards: want, n: e.n, hash: e.hash}
}
