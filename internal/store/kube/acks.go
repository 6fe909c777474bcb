package kube

// ackKey names one write as its watch event shows it: a version of a
// custom resource, or the deletion of an incarnation of it.
type ackKey struct {
	ref     crRef
	version int64
	uid     uid
	deleted bool
}

// acks remembers the revision the feed gave to recent events, so that a
// writer finds the revision of its write even when the event arrived
// before it asked. It keeps the last n: a writer whose event is older
// than that (more than n writes of others between its answer and its
// question) finds it shown by the watch's progress, and takes the feed's
// current revision.
type acks struct {
	m     map[ackKey]int64
	order []ackKey
	next  int
}

// ackWindow is how many recent events acks remembers. A writer asks for
// its event as soon as its request is answered, and the store has at most
// Workers requests of an Apply in flight: the events of others between
// its answer and its question number far fewer. Each costs about 270
// bytes (the key in the ring and in the map): 4,096 of them were a
// megabyte, a tenth of a kilobyte per Service at 10,000.
const ackWindow = 1024

func newAcks(n int) acks {
	return acks{m: make(map[ackKey]int64), order: make([]ackKey, n)}
}

func (a *acks) add(k ackKey, rev int64) {
	if _, ok := a.m[k]; !ok {
		if old := a.order[a.next]; old != (ackKey{}) {
			delete(a.m, old)
		}
		a.order[a.next] = k
		a.next = (a.next + 1) % len(a.order)
	}
	a.m[k] = rev
}

func (a *acks) get(k ackKey) (int64, bool) {
	rev, ok := a.m[k]
	return rev, ok
}
