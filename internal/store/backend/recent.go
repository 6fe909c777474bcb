package backend

import (
	"fmt"
	"sync"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// RecentCap is how many events a Recent keeps at least once it has seen
// that many (at most a quarter more): a reader further behind reads the
// database.
const RecentCap = 4096

// Recent holds the events of this process's last commits, so that Changes
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
// kept read-only and handed to every reader as they are (store.Event).
// Safe for concurrent use.
type Recent struct {
	mu     sync.Mutex
	events []RecentEvent // by revision, contiguous
	// latest is the object of the last event of each key in events,
	// for building the object of a status write without decoding labels
	// and spec.
	latest map[resource.Key]*resource.Object
	// lastRev is the revision of the last event of each key in events:
	// Changes skips the others, written again later (a map per call
	// was a twentieth of what a zone allocated in an initial sync).
	lastRev map[resource.Key]int64
}

// RecentEvent is one committed write: Obj is the stored object, read-only
// from then on; or, when the writer could not build it without decoding
// (a status write whose previous object Recent no longer held), Row, which
// the first reader decodes (so that the writer, which runs one
// transaction at a time, never decodes). Both are nil for a deletion.
type RecentEvent struct {
	Rev int64
	Key resource.Key
	Obj *resource.Object
	Row *Row
	// Enc is Obj's spec and status as stored (store.Event.Encoding).
	Enc *store.Encoding
}

// ObjectBefore returns the last object r holds for key, or nil. It is
// read-only: labels and spec may be shared with a copy whose status is
// replaced.
func (r *Recent) ObjectBefore(key resource.Key) *resource.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest[key]
}

// Add appends the events of one commit, in revision order.
func (r *Recent) Add(evs []RecentEvent) {
	if len(evs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.events); n > 0 && r.events[n-1].Rev+1 != evs[0].Rev {
		r.reset()
	}
	if r.latest == nil {
		r.latest = map[resource.Key]*resource.Object{}
		r.lastRev = map[resource.Key]int64{}
	}
	for _, e := range evs {
		r.events = append(r.events, e)
		r.lastRev[e.Key] = e.Rev
		if e.Obj == nil {
			delete(r.latest, e.Key) // deleted, or not decoded yet
		} else {
			r.latest[e.Key] = e.Obj
		}
	}
	// Trim only once a quarter of the cap is over it, so that the copy
	// down below is paid once per many commits, not at every one.
	if over := len(r.events) - RecentCap; over > RecentCap/4 {
		for _, e := range r.events[:over] {
			if r.latest[e.Key] == e.Obj {
				delete(r.latest, e.Key)
			}
			if r.lastRev[e.Key] == e.Rev {
				delete(r.lastRev, e.Key)
			}
		}
		// Copy down rather than reslice, so the array does not grow for
		// good.
		r.events = append(r.events[:0], r.events[over:]...)
	}
}

// Last returns the last revision r holds, or 0.
func (r *Recent) Last() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return 0
	}
	return r.events[len(r.events)-1].Rev
}

// First returns the first revision r holds, or 0.
func (r *Recent) First() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return 0
	}
	return r.events[0].Rev
}

// reset forgets everything (a compaction, another writer).
func (r *Recent) reset() {
	r.events = r.events[:0]
	clear(r.latest)
	clear(r.lastRev)
}

// Clear forgets everything: after a compaction, readers that resume below
// the new horizon must get store.ErrCompacted, which only the database
// tells.
func (r *Recent) Clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reset()
}

// Changes answers Changes(after, limit) when r holds every revision
// after after up to its last, and that is at least one: the latest event
// of each key written in that range, in revision order. ok is false when
// the database must be read. Events kept as rows are decoded here, by the
// reader, outside the lock, and kept decoded for the readers that follow,
// unless known (when not nil) has them (store.KnownFeed).
func (r *Recent) Changes(after int64, limit int, known store.Known) (evs []store.Event, ok bool) {
	r.mu.Lock()
	n := len(r.events)
	if n == 0 || after+1 < r.events[0].Rev || after >= r.events[n-1].Rev {
		r.mu.Unlock()
		return nil, false
	}
	start := int(after + 1 - r.events[0].Rev)
	want := n - start
	if limit > 0 {
		want = min(want, limit)
	}
	evs = make([]store.Event, 0, want)
	var rows map[int]*Row // index in evs -> row to decode
	for _, e := range r.events[start:] {
		if r.lastRev[e.Key] != e.Rev {
			continue // written again later in the range
		}
		ev := store.Event{Type: store.EventDelete, Revision: e.Rev, Key: e.Key}
		switch {
		case e.Obj != nil:
			ev.Type, ev.Object, ev.Encoding = store.EventPut, e.Obj, e.Enc
		case e.Row != nil:
			ev.Type = store.EventPut
			if rows == nil {
				rows = map[int]*Row{}
			}
			rows[len(evs)] = e.Row
		}
		evs = append(evs, ev)
		if len(evs) == limit {
			break
		}
	}
	r.mu.Unlock()
	if rows == nil {
		return evs, true
	}
	decoded := map[int64]*resource.Object{}
	for i, row := range rows {
		if known != nil {
			if o, ok := known(evs[i].Key, evs[i].Revision); ok {
				evs[i].Object = o // the reader's: not kept
				continue
			}
		}
		o, err := row.Object()
		if err != nil {
			return nil, false // the database will say what is wrong
		}
		evs[i].Object, evs[i].Encoding = o, row.Encoding()
		decoded[evs[i].Revision] = o
	}
	r.keep(decoded)
	return evs, true
}

// keep stores objects decoded by a reader in place of their rows, by
// revision, where r still holds them.
func (r *Recent) keep(decoded map[int64]*resource.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return
	}
	first := r.events[0].Rev
	for rev, o := range decoded {
		i := rev - first
		if i < 0 || i >= int64(len(r.events)) {
			continue
		}
		e := &r.events[i]
		if e.Rev != rev || e.Row == nil || e.Obj != nil {
			continue
		}
		e.Obj, e.Enc, e.Row = o, e.Row.Encoding(), nil
	}
}

// Event returns the event of op, which wrote next over cur (nil when the
// key had no row), for the readers of r, decoding nothing: a create or an
// update wrote op.Object's labels and spec as they are, and a status write
// kept those of the previous write of the resource, which r usually still
// holds, or which the status patch's Base shows when it is at the stored
// revision; when neither does (that write is older, or in the same group
// and not added yet), the event keeps next's row for its first reader to
// decode.
func (r *Recent) Event(op store.Op, next, cur *Row) (RecentEvent, error) {
	ev, err := r.event(op, next, cur)
	if err == nil && ev.Obj != nil {
		ev.Enc = next.Encoding()
	}
	return ev, err
}

func (r *Recent) event(op store.Op, next, cur *Row) (RecentEvent, error) {
	ev := RecentEvent{Rev: next.Revision, Key: next.Key}
	if next.Deleted {
		return ev, nil
	}
	var obj *resource.Object
	switch op.Type {
	case store.OpCreate, store.OpUpdate:
		if op.Handed {
			c := *op.Object // labels, spec and status are the caller's no more
			obj = &c
		} else {
			obj = op.Object.Clone()
		}
		if len(obj.Labels) == 0 {
			obj.Labels = nil
		}
		if op.Type == store.OpCreate {
			ev.Obj = stamp(obj, next)
			return ev, nil
		}
	default:
		prev := r.ObjectBefore(next.Key)
		if base := op.Base; base != nil && op.Type == store.OpPatchStatus && base.Key() == next.Key &&
			(prev == nil || cur == nil || prev.Revision != cur.Revision) {
			prev = base // used only at the stored revision (below): a revision is written once
		}
		if prev == nil || cur == nil || prev.Revision != cur.Revision {
			row := *next
			ev.Row = &row
			return ev, nil
		}
		c := *prev // labels and spec are read-only and shared
		obj = &c
	}
	if next.StatusOfOp && op.Object != nil && op.Object.Status != nil {
		// The patch stored the op's status as it is: share it (read-only,
		// store.Op) rather than decode what was just encoded.
		obj.Status = op.Object.Status
		ev.Obj = stamp(obj, next)
		return ev, nil
	}
	var err error
	if obj.Status, err = resource.UnmarshalStatus(next.Key.Kind, []byte(next.Status)); err != nil {
		return ev, fmt.Errorf("decode %s: %w", next.Key, err)
	}
	ev.Obj = stamp(obj, next)
	return ev, nil
}

// Object returns a copy of the object of ev, which the caller owns.
func (ev RecentEvent) Object() (*resource.Object, error) {
	if ev.Obj != nil {
		return ev.Obj.Clone(), nil
	}
	return ev.Row.Object()
}

// stamp sets the metadata of next on obj.
func stamp(obj *resource.Object, next *Row) *resource.Object {
	obj.Version, obj.Revision = next.Version, next.Revision
	obj.CreationTime, obj.ModificationTime = time.Unix(0, next.Created).UTC(), time.Unix(0, next.Modified).UTC()
	return obj
}

// WriteResult is the answer to op, which wrote next over cur (nil when the
// key had no row) and made the event ev: its revision, the revision it
// replaced, and a copy of the stored object unless op is a deletion or
// discards it.
func WriteResult(op store.Op, ev RecentEvent, next, cur *Row) (store.Result, error) {
	res := store.Result{Revision: next.Revision, Previous: LiveRevision(cur)}
	if next.Deleted || op.DiscardObject {
		return res, nil
	}
	var err error
	if res.Object, err = ev.Object(); err != nil {
		return store.Result{}, err
	}
	return res, nil
}
