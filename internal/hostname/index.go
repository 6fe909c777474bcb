package hostname

import "hash/maphash"

// hashIndex holds values by a 64-bit hash of their key rather than by the
// key itself: the engine's two big indexes (services by key, each mesh's
// claims by hostname) are dominated by lookups, and a map keyed by the key
// keeps a second copy of every key and re-hashes it each time the map
// grows. A value whose key hashes like one already there, which in
// practice happens only in tests that narrow Engine.hashMask, goes to
// collided, keyed by the key itself. keyOf returns a value's key.
type hashIndex[K comparable, V any] struct {
	byHash   map[uint64]*V
	collided map[K]*V
	keyOf    func(*V) K
}

func newHashIndex[K comparable, V any](keyOf func(*V) K) *hashIndex[K, V] {
	return &hashIndex[K, V]{byHash: map[uint64]*V{}, keyOf: keyOf}
}

// get returns the value of key k, whose hash is h, or nil. x may be nil.
func (x *hashIndex[K, V]) get(h uint64, k K) *V {
	if x == nil {
		return nil
	}
	if v := x.byHash[h]; v != nil && x.keyOf(v) == k {
		return v
	}
	return x.collided[k] // a nil map reads as empty
}

// add adds v, whose key has hash h and is not in x yet.
func (x *hashIndex[K, V]) add(h uint64, v *V) {
	if x.byHash[h] == nil {
		x.byHash[h] = v
		return
	}
	if x.collided == nil {
		x.collided = map[K]*V{}
	}
	x.collided[x.keyOf(v)] = v
}

// remove removes v, whose key has hash h.
func (x *hashIndex[K, V]) remove(h uint64, v *V) {
	if x.byHash[h] == v {
		delete(x.byHash, h)
		return
	}
	delete(x.collided, x.keyOf(v))
	if len(x.collided) == 0 {
		x.collided = nil
	}
}

func (x *hashIndex[K, V]) len() int { return len(x.byHash) + len(x.collided) }

// all yields every value, in no particular order.
func (x *hashIndex[K, V]) all(yield func(*V) bool) {
	for _, v := range x.byHash {
		if !yield(v) {
			return
		}
	}
	for _, v := range x.collided {
		if !yield(v) {
			return
		}
	}
}

// keyHash returns the hash of a service key, narrowed by hashMask.
func (e *Engine) keyHash(k ServiceKey) uint64 {
	h := maphash.String(e.seed, k.Name)
	h = (h<<17 | h>>47) ^ maphash.String(e.seed, k.Mesh)
	h = (h<<17 | h>>47) ^ maphash.String(e.seed, k.Kind)
	return h & e.hashMask
}
