package reconcile

// Inflight holds what a controller wrote whose echo its cache does not
// show yet, keyed by resource. A controller compares what it would write
// with what the store holds; until the echo of its last write arrives the
// cache shows the older value, and comparing with that would write the
// same thing again. Pending answers with the written value instead while
// the cache is behind.
//
// It nearly always holds few entries: one is forgotten as soon as the
// cache shows its write, which the echo's event makes the controller look
// at. A full pass (every resource, at start) fills it, and a Go map never
// gives back the room of entries deleted from it, so after a peak of more
// than keepPending entries Inflight drops its map once empty, or copies
// what remains once it holds a quarter of the peak; a smaller map is kept
// for the next batch (a zone's initial sync writes a thousand at a time).
// The zero value is empty and ready. Not safe for concurrent use.
type Inflight[K comparable, V any] struct {
	m    map[K]written[V]
	peak int
}

type written[V any] struct {
	// revision is the store revision the write was given; 0 while the
	// write is under way.
	revision int64
	value    V
}

// Put records a write of v to k that is under way.
func (f *Inflight[K, V]) Put(k K, v V) {
	if f.m == nil {
		f.m = map[K]written[V]{}
	}
	f.m[k] = written[V]{value: v}
	f.peak = max(f.peak, len(f.m))
}

// Written records the revision the store gave the write of k.
func (f *Inflight[K, V]) Written(k K, rev int64) {
	if w, ok := f.m[k]; ok {
		w.revision = rev
		f.m[k] = w
	}
}

// Pending returns the value last written to k while the cache's copy, at
// revision rev, is older than that write. Otherwise the cache shows the
// write, or a later change (a new resource of the same name is one), and
// Pending forgets it. A copy without a revision (0) is taken as caught
// up: the worst that can come of it is the redundant write Inflight
// prevents, never a stale belief about what the store holds. A write
// still under way (no revision yet) is forgotten too.
func (f *Inflight[K, V]) Pending(k K, rev int64) (V, bool) {
	w, ok := f.m[k]
	if ok && rev != 0 && rev < w.revision {
		return w.value, true
	}
	f.Forget(k)
	var zero V
	return zero, false
}

// Forget drops what is recorded for k (a failed write, a deleted
// resource).
func (f *Inflight[K, V]) Forget(k K) {
	if _, ok := f.m[k]; !ok {
		return
	}
	delete(f.m, k)
	switch n := len(f.m); {
	case n == 0 && f.peak <= keepPending:
		f.peak = 0 // the map is kept for the next burst (see Queue.Take)
	case n == 0:
		*f = Inflight[K, V]{}
	case f.peak > keepPending && n < f.peak/4:
		m := make(map[K]written[V], n)
		for k, w := range f.m {
			m[k] = w
		}
		*f = Inflight[K, V]{m: m, peak: n}
	}
}

// Len returns how many writes are recorded.
func (f *Inflight[K, V]) Len() int { return len(f.m) }
