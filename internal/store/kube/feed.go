package kube

import (
	"sort"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// feed is the change feed: the last event of each resource, in revision
// order, and the tombstones of deleted ones until they are compacted.
// Superseded events are marked dead and swept when they outnumber the
// live ones. The store's mutex guards it.
type feed struct {
	events []feedEvent
	index  map[resource.Key]int // position of the live event of each key
	dead   int
	// start is the revision of the newest event dropped by compaction:
	// readers resuming from before it missed something.
	start int64
}

type feedEvent struct {
	rev  int64
	key  resource.Key
	e    *entry // nil for a delete
	at   time.Time
	dead bool
}

func newFeed() feed { return feed{index: map[resource.Key]int{}} }

func (f *feed) supersede(k resource.Key) {
	if i, ok := f.index[k]; ok {
		f.events[i].dead = true
		f.events[i].e = nil
		f.dead++
		delete(f.index, k)
	}
}

// add appends the event of key k at rev (after every event in the feed).
func (f *feed) add(rev int64, k resource.Key, e *entry, at time.Time) {
	f.supersede(k)
	f.index[k] = len(f.events)
	f.events = append(f.events, feedEvent{rev: rev, key: k, e: e, at: at})
	if f.dead > 1024 && f.dead > len(f.events)/2 {
		f.sweep()
	}
}

// sweep drops dead events.
func (f *feed) sweep() {
	live := make([]feedEvent, 0, len(f.events)-f.dead)
	for _, ev := range f.events {
		if !ev.dead {
			f.index[ev.key] = len(live)
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
	for i := range f.events {
		ev := &f.events[i]
		if ev.dead || ev.e != nil || !ev.at.Before(cutoff) {
			continue
		}
		ev.dead = true
		f.dead++
		delete(f.index, ev.key)
		f.start = max(f.start, ev.rev)
		n++
	}
	if n > 0 {
		f.sweep()
	}
	return n
}
