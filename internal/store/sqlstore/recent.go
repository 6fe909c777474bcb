package sqlstore

import (
	"sync"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// recentCap bounds the events recent keeps: a reader further behind reads
// the database, as before.
const recentCap = 4096

// recent holds the events of this process's last commits, so that Changes
// serves a reader that is nearly caught up - the cache of this process
// follows every write within milliseconds - with the objects the writer
// already has, instead of reading back and decoding the rows it has just
// written. The stored feed stays the source for everyone else (other
// instances on PostgreSQL, zone streams that resume from a revision).
//
// Its events cover a contiguous range of revisions: a commit whose first
// revision does not follow the last one kept (another process wrote in
// between) starts it afresh, and a compaction empties it. Where other
// processes write too (PostgreSQL), Changes uses it only after checking
// that the database holds nothing after its last revision. Objects are
// kept read-only and cloned for each reader. Safe for concurrent use.
type recent struct {
	mu     sync.Mutex
	events []recentEvent // by revision, contiguous
	// latest is the object of the last event of each key in events,
	// for building the object of a status write without decoding labels
	// and spec.
	latest map[resource.Key]*resource.Object
}

type recentEvent struct {
	rev int64
	key resource.Key
	obj *resource.Object // nil for a deletion
}

// objectBefore returns the last object recent holds for key, or nil.
func (r *recent) objectBefore(key resource.Key) *resource.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest[key]
}

// add appends the events of one commit, in revision order.
func (r *recent) add(evs []recentEvent) {
	if len(evs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.events); n > 0 && r.events[n-1].rev+1 != evs[0].rev {
		r.reset()
	}
	if r.latest == nil {
		r.latest = map[resource.Key]*resource.Object{}
	}
	for _, e := range evs {
		r.events = append(r.events, e)
		if e.obj == nil {
			delete(r.latest, e.key)
		} else {
			r.latest[e.key] = e.obj
		}
	}
	if over := len(r.events) - recentCap; over > 0 {
		for _, e := range r.events[:over] {
			if r.latest[e.key] == e.obj {
				delete(r.latest, e.key)
			}
		}
		// Copy down rather than reslice, so the array does not grow for
		// good.
		r.events = append(r.events[:0], r.events[over:]...)
	}
}

// last returns the last revision recent holds, or 0.
func (r *recent) last() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return 0
	}
	return r.events[len(r.events)-1].rev
}

// reset forgets everything (a compaction, another writer).
func (r *recent) reset() {
	r.events = r.events[:0]
	clear(r.latest)
}

func (r *recent) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reset()
}

// changes answers Changes(after, limit) when recent holds every revision
// after after up to its last, and that is at least one: the latest event
// of each key written in that range, in revision order. ok is false when
// the database must be read.
func (r *recent) changes(after int64, limit int) (evs []store.Event, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.events)
	if n == 0 || after+1 < r.events[0].rev || after >= r.events[n-1].rev {
		return nil, false
	}
	start := int(after + 1 - r.events[0].rev)
	last := map[resource.Key]int64{}
	for _, e := range r.events[start:] {
		last[e.key] = e.rev
	}
	for _, e := range r.events[start:] {
		if last[e.key] != e.rev {
			continue // written again later in the range
		}
		ev := store.Event{Type: store.EventDelete, Revision: e.rev, Key: e.key}
		if e.obj != nil {
			ev.Type, ev.Object = store.EventPut, e.obj.Clone()
		}
		evs = append(evs, ev)
		if len(evs) == limit {
			break
		}
	}
	return evs, true
}
