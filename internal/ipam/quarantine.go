package ipam

import "time"

// quarantine maps offsets to the end of their quarantine, with a min-heap on
// (end, offset) so the next end is found in O(1) and k ended entries are
// removed in O(k log n). Each entry knows its heap index, so an entry is
// extended or removed in place, and the heap never holds stale entries.
type quarantine struct {
	heap []qentry
	idx  map[uint64]int // offset -> index in heap
}

type qentry struct {
	until time.Time
	off   uint64
}

func newQuarantine() quarantine { return quarantine{idx: make(map[uint64]int)} }

func (q *quarantine) len() int { return len(q.heap) }

func (q *quarantine) get(off uint64) (time.Time, bool) {
	i, ok := q.idx[off]
	if !ok {
		return time.Time{}, false
	}
	return q.heap[i].until, true
}

// put quarantines off until until, or extends its quarantine: the later end
// wins.
func (q *quarantine) put(off uint64, until time.Time) {
	if i, ok := q.idx[off]; ok {
		if until.After(q.heap[i].until) {
			q.heap[i].until = until
			q.down(i) // a later end can only sink
		}
		return
	}
	q.heap = append(q.heap, qentry{until: until, off: off})
	q.idx[off] = len(q.heap) - 1
	q.up(len(q.heap) - 1)
}

// remove drops off from the quarantine; it reports whether it was there.
func (q *quarantine) remove(off uint64) bool {
	i, ok := q.idx[off]
	if !ok {
		return false
	}
	q.removeAt(i)
	return true
}

// peek returns the entry that ends first.
func (q *quarantine) peek() (qentry, bool) {
	if len(q.heap) == 0 {
		return qentry{}, false
	}
	return q.heap[0], true
}

// popEnded removes and returns the first entry if it has ended at now.
func (q *quarantine) popEnded(now time.Time) (uint64, bool) {
	if len(q.heap) == 0 || q.heap[0].until.After(now) {
		return 0, false
	}
	off := q.heap[0].off
	q.removeAt(0)
	return off, true
}

// countEnded counts the entries ended at now without removing them, walking
// only the part of the heap that has ended: O(k).
func (q *quarantine) countEnded(now time.Time) int {
	n := 0
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(q.heap) || q.heap[i].until.After(now) {
			continue
		}
		n++
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return n
}

func (q *quarantine) removeAt(i int) {
	last := len(q.heap) - 1
	delete(q.idx, q.heap[i].off)
	if i != last {
		q.heap[i] = q.heap[last]
		q.idx[q.heap[i].off] = i
	}
	q.heap[last] = qentry{}
	q.heap = q.heap[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	if cap(q.heap) > 64 && len(q.heap) < cap(q.heap)/4 {
		// A burst of releases must not pin its peak memory forever (Go
		// maps never shrink, so the index is rebuilt too).
		q.heap = append([]qentry(nil), q.heap...)
		q.idx = make(map[uint64]int, len(q.heap))
		for j, e := range q.heap {
			q.idx[e.off] = j
		}
	}
}

func (q *quarantine) less(i, j int) bool {
	a, b := &q.heap[i], &q.heap[j]
	if !a.until.Equal(b.until) {
		return a.until.Before(b.until)
	}
	return a.off < b.off
}

func (q *quarantine) swap(i, j int) {
	q.heap[i], q.heap[j] = q.heap[j], q.heap[i]
	q.idx[q.heap[i].off] = i
	q.idx[q.heap[j].off] = j
}

func (q *quarantine) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

func (q *quarantine) down(i int) {
	n := len(q.heap)
	for {
		least := i
		if l := 2*i + 1; l < n && q.less(l, least) {
			least = l
		}
		if r := 2*i + 2; r < n && q.less(r, least) {
			least = r
		}
		if least == i {
			return
		}
		q.swap(i, least)
		i = least
	}
}
