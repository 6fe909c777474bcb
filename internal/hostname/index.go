package hostname

import "hash/maphash"

// svcIndex holds the engine's services by key. It is a map by a 64-bit
// hash of the key rather than by the key itself: a map keyed by
// ServiceKey keeps a second copy of every key (48 bytes, besides the
// copy in svcState) and costs some 60 bytes per service more. Keys whose
// hash another key had first, which in practice happens only in tests that
// narrow Engine.hashMask, go to collided.
type svcIndex struct {
	byHash   map[uint64]*svcState
	collided map[ServiceKey]*svcState
}

func newSvcIndex() svcIndex {
	return svcIndex{byHash: map[uint64]*svcState{}}
}

// get returns the service with key k, whose hash is h, or nil.
func (x *svcIndex) get(h uint64, k ServiceKey) *svcState {
	if s := x.byHash[h]; s != nil && s.key == k {
		return s
	}
	return x.collided[k] // a nil map reads as empty
}

// add adds s, whose key has hash h and is not in x yet.
func (x *svcIndex) add(h uint64, s *svcState) {
	if x.byHash[h] == nil {
		x.byHash[h] = s
		return
	}
	if x.collided == nil {
		x.collided = map[ServiceKey]*svcState{}
	}
	x.collided[s.key] = s
}

// remove removes s, whose key has hash h.
func (x *svcIndex) remove(h uint64, s *svcState) {
	if x.byHash[h] == s {
		delete(x.byHash, h)
		return
	}
	delete(x.collided, s.key)
	if len(x.collided) == 0 {
		x.collided = nil
	}
}

func (x *svcIndex) len() int { return len(x.byHash) + len(x.collided) }

// all yields every service, in no particular order.
func (x *svcIndex) all(yield func(*svcState) bool) {
	for _, s := range x.byHash {
		if !yield(s) {
			return
		}
	}
	for _, s := range x.collided {
		if !yield(s) {
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
