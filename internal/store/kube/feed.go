package kube

import (
	"sort"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// feed is the change feed: the last event of each resource, in revision
// order, and the tombstones of deleted ones until they are compacted. An
// event is the entry it made: the resource's copy for a put, a tombstone
// (an entry without data) for a delete; each entry knows its place in
// events. Superseded events are cleared and swept when they outnumber
// the live ones. The store's mutex guards it.
type feed struct {
	events []feedEvent
	// tombs are the tombstones in events, by key, with when each was
	// written (UnixNano), for compaction: kept here rather than in every
	// entry, where it took 16 bytes per resource.
	tombs map[resource.Key]tomb
	dead  int
	// start is the revision of the newest event dropped by compaction:
	// readers resuming from before it missed something.
	start int64
}

type tomb struct {
	e  *entry
	at int64
}

type feedEvent struct {
	rev int64
	e   *entry // nil once superseded
}

func newFeed() feed { return feed{tombs: map[resource.Key]tomb{}} }

// add appends the event of entry e (at a revision after every event in the
// feed), superseding the event of its key: live, the key's current entry,
// or else its tombstone. at is when a tombstone was written (UnixNano).
func (f *feed) add(e, live *entry, at int64) {
	prev := live
	if prev == nil {
		prev = f.tombs[e.key].e
	}
	if prev != nil {
		f.events[prev.pos].e = nil
		f.dead++
		if prev.tombstone() {
			delete(f.tombs, prev.key)
		}
	}
	e.pos = len(f.events)
	f.events = append(f.events, feedEvent{rev: e.rev, e: e})
	if e.tombstone() {
		f.tombs[e.key] = tomb{e: e, at: at}
	}
	if f.dead > 1024 && f.dead > len(f.events)/2 {
		f.sweep()
	}
}

// sweep drops superseded events.
func (f *feed) sweep() {
	live := make([]feedEvent, 0, len(f.events)-f.dead)
	for _, ev := range f.events {
		if ev.e != nil {
			ev.e.pos = len(live)
			live = append(live, ev)
		}
	}
	f.events, f.dead = live, 0
}

// after returns the position of the first event with a revision greater
// than rev.
func (f *feed) after(rev int64) int {
	return sort.Search(len(f.events), func(i int) bool { return f.events[i].rev > rev })
}

// compact drops the tombstones written before cutoff and returns how many.
func (f *feed) compact(cutoff time.Time) int {
	n := 0
	for k, t := range f.tombs {
		if t.at >= cutoff.UnixNano() {
			continue
		}
		f.events[t.e.pos].e = nil
		f.dead++
		delete(f.tombs, k)
		f.start = max(f.start, t.e.rev)
		n++
	}
	if n > 0 {
		f.sweep()
	}
	return n
}
