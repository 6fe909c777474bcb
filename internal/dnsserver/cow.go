package dnsserver

import (
	"hash/maphash"
	"iter"
	"maps"
	"net/netip"

	"github.com/meshnames/meshnames/internal/resource"
)

// shards is how many maps a cowMap spreads its keys over. A change clones
// only the shards it touches: with 100,000 names a shard holds about 400.
const shards = 1024

var hashSeed = maphash.MakeSeed()

func hashString(s string) uint64 { return maphash.String(hashSeed, s) }

func hashKey(k resource.Key) uint64 {
	return maphash.String(hashSeed, string(k.Kind)+"/"+k.Mesh+"/"+k.Name)
}

func hashAddr(a netip.Addr) uint64 {
	b := a.As16()
	return maphash.Bytes(hashSeed, b[:])
}

// cowMap is an immutable map split into shards. Readers use it without
// locks; a writer derives a new one with edit, which copies the shard
// pointers and clones a shard the first time it changes it, so a change
// costs the size of the shards it touches rather than of the whole map.
type cowMap[K comparable, V any] struct {
	m    *[shards]map[K]V
	n    int
	hash func(K) uint64
}

func newCowMap[K comparable, V any](hash func(K) uint64) cowMap[K, V] {
	return cowMap[K, V]{m: new([shards]map[K]V), hash: hash}
}

// Get returns the value of k.
func (c cowMap[K, V]) Get(k K) (V, bool) {
	v, ok := c.m[c.hash(k)%shards][k]
	return v, ok
}

// Len returns the number of keys.
func (c cowMap[K, V]) Len() int { return c.n }

// All yields every key and value, in no particular order.
func (c cowMap[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, s := range c.m {
			for k, v := range s {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// cowEdit is a change being made to a cowMap; the original is unchanged.
type cowEdit[K comparable, V any] struct {
	next  [shards]map[K]V
	owned [shards]bool
	n     int
	hash  func(K) uint64
}

func (c cowMap[K, V]) edit() *cowEdit[K, V] {
	return &cowEdit[K, V]{next: *c.m, n: c.n, hash: c.hash}
}

func (e *cowEdit[K, V]) shard(k K) int { return int(e.hash(k) % shards) }

func (e *cowEdit[K, V]) own(i int) map[K]V {
	if !e.owned[i] {
		if e.next[i] == nil {
			e.next[i] = map[K]V{}
		} else {
			e.next[i] = maps.Clone(e.next[i])
		}
		e.owned[i] = true
	}
	return e.next[i]
}

func (e *cowEdit[K, V]) Get(k K) (V, bool) {
	v, ok := e.next[e.shard(k)][k]
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
	if _, had := e.next[i][k]; !had {
		return
	}
	delete(e.own(i), k)
	e.n--
}

// done returns the edited map. The edit must not be used afterwards.
func (e *cowEdit[K, V]) done() cowMap[K, V] {
	m := new([shards]map[K]V)
	*m = e.next
	return cowMap[K, V]{m: m, n: e.n, hash: e.hash}
}
