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

// A shardMap spreads its keys over a power of two of shards, at most
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

// shardMap is an immutable map split into shards. Readers use it without
// locks; a writer derives a new one with edit, which clones a shard the
// first time it changes it, so a change costs the size of the shards it
// touches rather than of the whole map. The number of shards grows with
// the map (done).
//
// The shards are held in pages of at most pageShards, and an edit clones
// the list of pages and then only the pages it touches: a change of one
// service at 100,000 names copied the 2,048 shard pointers of each of its
// maps (60 KB a change with the bookkeeping) when they were one slice.
type shardMap[K comparable, V any] struct {
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

func newShardMap[K comparable, V any](hash func(K) uint64) shardMap[K, V] {
	return shardMap[K, V]{pages: newPages[K, V](minShards), shards: minShards, hash: hash}
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
func (c shardMap[K, V]) Get(k K) (V, bool) { return c.getHashed(k, c.hash(k)) }

// getHashed is Get with the hash of k.
func (c shardMap[K, V]) getHashed(k K, h uint64) (V, bool) {
	i := h & uint64(c.shards-1)
	v, ok := c.pages[i>>pageBits][i&(pageShards-1)][k]
	return v, ok
}

// Len returns the number of keys.
func (c shardMap[K, V]) Len() int { return c.n }

// All yields every key and value, in no particular order.
func (c shardMap[K, V]) All() iter.Seq2[K, V] {
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

// shardEdit is a change being made to a shardMap; the original is
// unchanged.
type shardEdit[K comparable, V any] struct {
	pages [][]map[K]V
	// owned has a bit for each shard of a page that this edit cloned; a
	// page with any is the edit's own copy too.
	owned  []uint64
	shards int
	n      int
	hash   func(K) uint64
}

func (c shardMap[K, V]) edit() *shardEdit[K, V] {
	return &shardEdit[K, V]{pages: slices.Clone(c.pages), owned: make([]uint64, len(c.pages)), shards: c.shards, n: c.n, hash: c.hash}
}

func (e *shardEdit[K, V]) shard(k K) int { return int(e.hash(k) & uint64(e.shards-1)) }

func (e *shardEdit[K, V]) at(i int) map[K]V { return e.pages[i>>pageBits][i&(pageShards-1)] }

func (e *shardEdit[K, V]) own(i int) map[K]V {
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
func (e *shardEdit[K, V]) cloned() int {
	n := 0
	for _, w := range e.owned {
		n += bits.OnesCount64(w)
	}
	return n
}

func (e *shardEdit[K, V]) Get(k K) (V, bool) { return e.getHashed(k, e.hash(k)) }

// getHashed is Get with the hash of k.
func (e *shardEdit[K, V]) getHashed(k K, h uint64) (V, bool) {
	v, ok := e.at(int(h & uint64(e.shards-1)))[k]
	return v, ok
}

func (e *shardEdit[K, V]) Set(k K, v V) { e.setHashed(k, e.hash(k), v) }

// setHashed is Set with the hash of k; it returns k's previous value.
func (e *shardEdit[K, V]) setHashed(k K, h uint64, v V) (V, bool) {
	s := e.own(int(h & uint64(e.shards-1)))
	old, had := s[k]
	if !had {
		e.n++
	}
	s[k] = v
	return old, had
}

func (e *shardEdit[K, V]) Delete(k K) {
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
func (e *shardEdit[K, V]) done() shardMap[K, V] {
	want := e.shards
	for want < maxShards && e.n > shardKeys*want {
		want *= 2
	}
	if want == e.shards {
		return shardMap[K, V]{pages: e.pages, shards: e.shards, n: e.n, hash: e.hash}
	}
	pages := newPages[K, V](want)
	mask := uint64(want - 1)
	// Each new shard is made for its share of the keys and a margin, so
	// that filling it does not grow it step by step (a rehash of every
	// key at each step).
	hint := e.n/want + e.n/want/4
	for _, p := range e.pages {
		for _, s := range p {
			for k, v := range s {
				i := e.hash(k) & mask
				page := pages[i>>pageBits]
				if page[i&(pageShards-1)] == nil {
					page[i&(pageShards-1)] = make(map[K]V, hint)
				}
				page[i&(pageShards-1)][k] = v
			}
		}
	}
	return shardMap[K, V]{pages: pages, shards: want, n: e.n, hash: e.hash}
}

// cowMap is the immutable map the DNS views are made of: a shardMap
// (base) and a smaller one of the changes made since (delta), which hides
// what it changes of base. An edit clones only the shards of delta it
// touches; when delta outgrows mergeAt, done writes it into base, cloning
// the shards of base it touches, and starts an empty one.
//
// A batch of changes clones a share of its map's shards, the more of
// them the more keys it changes: a zone storing what a 10 x 10,000
// initial sync sends it changes a thousand or more names at a time, a
// third or more of the shards of all its names, and with one shardMap
// those clones were 10% of what it allocated. Cloning within the delta
// costs a share of the delta rather than of every name, and a merge
// clones the base once for the mergeAt changes since the last. In that
// sync, a zone's clones went from 120 to 53 MB and its DNS builder from
// 1.13 to 0.99 s of CPU (one profiled run each); BenchmarkNameInBatches,
// which starts from an empty index, from 334 to 309 MB. A read looks in
// the delta first, with the same hash, when it is not empty.
type cowMap[K comparable, V any] struct {
	base  shardMap[K, V]
	delta shardMap[K, slot[V]]
	n     int
}

// slot is a change that delta holds: a value, or the deletion of the key
// from base.
type slot[V any] struct {
	v       V
	deleted bool
}

// mergeDivisor sets when a delta is merged into its base: once it holds
// more than a mergeDivisor-th of the map's keys (and more than fit in
// minShards shards).
const mergeDivisor = 8

func mergeAt(n int) int { return max(n/mergeDivisor, shardKeys*minShards) }

func newCowMap[K comparable, V any](hash func(K) uint64) cowMap[K, V] {
	return cowMap[K, V]{base: newShardMap[K, V](hash), delta: newShardMap[K, slot[V]](hash)}
}

// Get returns the value of k. The delta and the base share a hash
// function: k is hashed once for both.
func (c cowMap[K, V]) Get(k K) (V, bool) {
	h := c.base.hash(k)
	if c.delta.n > 0 {
		if s, ok := c.delta.getHashed(k, h); ok {
			return s.v, !s.deleted
		}
	}
	return c.base.getHashed(k, h)
}

// Len returns the number of keys.
func (c cowMap[K, V]) Len() int { return c.n }

// All yields every key and value, in no particular order.
func (c cowMap[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, v := range c.base.All() {
			if c.delta.n > 0 {
				if _, changed := c.delta.Get(k); changed {
					continue
				}
			}
			if !yield(k, v) {
				return
			}
		}
		for k, s := range c.delta.All() {
			if !s.deleted && !yield(k, s.v) {
				return
			}
		}
	}
}

// edit starts a change. The change of an empty map (a view's first build,
// at a start) goes into its base directly: through a delta, which it
// would outgrow at once, every key would be written twice.
func (c cowMap[K, V]) edit() *cowEdit[K, V] {
	if c.n == 0 && c.delta.Len() == 0 {
		return &cowEdit[K, V]{base: c.base, direct: c.base.edit()} // base for its hash
	}
	return &cowEdit[K, V]{base: c.base, delta: c.delta.edit(), n: c.n}
}

// cowEdit is a change being made to a cowMap; the original is unchanged.
type cowEdit[K comparable, V any] struct {
	base  shardMap[K, V] // read only
	delta *shardEdit[K, slot[V]]
	n     int
	// direct, when not nil, is the edit of an empty map's base, which
	// takes every change instead of a delta.
	direct *shardEdit[K, V]
}

func (e *cowEdit[K, V]) Get(k K) (V, bool) { return e.getHashed(k, e.base.hash(k)) }

func (e *cowEdit[K, V]) Set(k K, v V) { e.Put(k, v) }

// Put sets k to v and returns k's previous value, hashing k once.
func (e *cowEdit[K, V]) Put(k K, v V) (V, bool) {
	h := e.base.hash(k)
	if e.direct != nil {
		return e.direct.setHashed(k, h, v)
	}
	old, had := e.getHashed(k, h)
	if !had {
		e.n++
	}
	e.delta.setHashed(k, h, slot[V]{v: v})
	return old, had
}

// getHashed is Get with the hash of k.
func (e *cowEdit[K, V]) getHashed(k K, h uint64) (V, bool) {
	if e.direct != nil {
		return e.direct.getHashed(k, h)
	}
	if s, ok := e.delta.getHashed(k, h); ok {
		return s.v, !s.deleted
	}
	return e.base.getHashed(k, h)
}

func (e *cowEdit[K, V]) Delete(k K) {
	if e.direct != nil {
		e.direct.Delete(k)
		return
	}
	if _, had := e.Get(k); !had {
		return
	}
	if _, inBase := e.base.Get(k); inBase {
		e.delta.Set(k, slot[V]{deleted: true})
	} else {
		e.delta.Delete(k)
	}
	e.n--
}

// done returns the edited map, its delta merged into its base when it
// has grown past mergeAt. The edit must not be used afterwards.
func (e *cowEdit[K, V]) done() cowMap[K, V] {
	if e.direct != nil {
		base := e.direct.done()
		return cowMap[K, V]{base: base, delta: newShardMap[K, slot[V]](base.hash), n: base.Len()}
	}
	delta := e.delta.done()
	if delta.Len() <= mergeAt(e.n) {
		return cowMap[K, V]{base: e.base, delta: delta, n: e.n}
	}
	be := e.base.edit()
	for k, s := range delta.All() {
		if s.deleted {
			be.Delete(k)
		} else {
			be.Set(k, s.v)
		}
	}
	return cowMap[K, V]{base: be.done(), delta: newShardMap[K, slot[V]](e.base.hash), n: e.n}
}
