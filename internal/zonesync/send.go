package zonesync

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// sendLoop follows this store's feed from the peer's position and sends
// what the peer gets, in batches, with heartbeats while idle.
func (l *link) sendLoop(ctx context.Context, from Position) error {
	rev, full, err := l.resumePoint(ctx, from)
	if err != nil {
		return err
	}
	if full {
		if rev, err = l.sendSnapshot(ctx); err != nil {
			return err
		}
	}
	beat := time.NewTicker(l.heartbeat)
	defer beat.Stop()
	sentRev := rev // the revision of the last batch sent
	lastSend := time.Now()
	lastChange := time.Now() // of a batch the peer got something in
	// The peer checks what it holds against an inventory once the stream
	// settles, and again after what it gets next settles, at most every
	// inventoryEvery heartbeats: a stream that stays up for days would
	// otherwise check only once, at its start.
	inventoryDue := true
	var lastInventory time.Time
	requested := 0    // full states the peer asked for on this stream
	wantFull := false // the peer asked for one (l.fullWanted)
	defer l.feed.close()
	for {
		wake := l.st.Changed()
		if !wantFull {
			select {
			case <-l.fullWanted:
				wantFull = true
			default:
			}
		}
		if wantFull {
			wantFull = false
			if requested++; requested > 1 {
				// One full state did not make the inventories agree (the
				// peer refuses something of it): another would not either.
				l.log.Warn("the peer asked for a full state again; it gets one on its next stream", "peer", l.peer)
			} else {
				l.log.Info("sending a full state the peer asked for", "peer", l.peer)
				if rev, err = l.sendSnapshot(ctx); err != nil {
					return err
				}
				sentRev, lastSend, lastChange = rev, time.Now(), time.Now()
				inventoryDue = true // and check that it repaired what differed
			}
		}
		evs, err := l.feed.changes(ctx, rev, pageSize)
		switch {
		case errors.Is(err, store.ErrCompacted):
			l.log.Info("the change feed was compacted past the peer's revision; sending a full state", "peer", l.peer, "revision", rev)
			if rev, err = l.sendSnapshot(ctx); err != nil {
				return err
			}
			sentRev, lastSend, lastChange = rev, time.Now(), time.Now()
			inventoryDue = true
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read the change feed: %w", err)
		}
		if len(evs) > 0 {
			sent, err := l.sendEvents(ctx, rev, evs)
			if err != nil {
				return err
			}
			rev = evs[len(evs)-1].rev
			if sent {
				sentRev, lastSend, lastChange = rev, time.Now(), time.Now()
				inventoryDue = true
			}
			// Read again before waiting: a page shorter than pageSize
			// does not say the feed has nothing more (the global's
			// shared window may end before the store does), and what
			// was written before wake was taken will not wake it.
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-l.fullWanted:
			wantFull = true
		case <-beat.C:
			if sentRev < rev && time.Since(lastSend) >= l.heartbeat {
				// Nothing of what changed here lately was for the peer:
				// tell it how far it is, so that it resumes from there.
				if err := l.sendBatch(ctx, rev, 0, encodeChanges(rev, false, false, nil, nil), true); err != nil {
					return err
				}
				sentRev, lastSend = rev, time.Now()
			}
			if l.inventories && inventoryDue && time.Since(lastChange) >= l.heartbeat &&
				(lastInventory.IsZero() || time.Since(lastInventory) >= inventoryEvery*l.heartbeat) {
				to, sent, ok, err := l.sendInventory(ctx, rev)
				if err != nil {
					return err
				}
				if sent {
					sentRev, lastSend, lastChange = to, time.Now(), time.Now()
				}
				rev, inventoryDue = to, !ok
				if ok {
					lastInventory = time.Now()
				}
			}
		}
	}
}

// sendInventory sends what the peer should hold of this side's resources
// (inventory.go), taken from the cache while it moved from revision from
// to revision to, after the feed up to to: what changed up to from is in
// the inventory and is sent before it; what changed after from may or may
// not be, so it must change nothing the peer holds (changesHolding), or
// the inventory is dropped and taken again at a later heartbeat. A busy
// global's cache moves all the time, mostly with what no zone gets (the
// zones' Dataplanes and the status of their services). It returns the
// revision the feed was read to, whether a batch was sent, and whether the
// inventory was.
func (l *link) sendInventory(ctx context.Context, rev int64) (to int64, sent, ok bool, err error) {
	if err := l.cache.WaitFor(ctx, rev); err != nil {
		return rev, false, false, nil // ctx ended
	}
	from := l.cache.Revision()
	inv := l.side.expected()
	to = l.cache.Revision()
	var evs []outEvent
	for cur := rev; cur < to; {
		page, err := l.feed.changes(ctx, cur, pageSize)
		if err != nil {
			return rev, false, false, nil // the loop reads it again, or fails
		}
		if len(page) == 0 {
			break // a skipping feed ends at its last put the peer gets
		}
		for _, ev := range page {
			if ev.rev > to {
				break
			}
			if ev.rev > from && l.changesHolding(ev) {
				return rev, false, false, nil
			}
			evs = append(evs, ev)
		}
		cur = page[len(page)-1].rev
	}
	if len(evs) > 0 {
		if sent, err = l.sendEvents(ctx, rev, evs); err != nil {
			return rev, false, false, err
		}
		rev = evs[len(evs)-1].rev
	}
	if err := l.sendEnvelope(&pb.Envelope{Body: &pb.Envelope_Inventory{Inventory: inv.wire(rev)}}); err != nil {
		return rev, sent, false, fmt.Errorf("send the inventory: %w", err)
	}
	return rev, sent, true, nil
}

// changesHolding reports whether sending ev could change which of this
// side's resources the peer holds: a deletion, a put the peer gets that
// this stream has not sent it as it is (which may be a new resource), and
// any change of a Zone (its services may come or go, related).
func (l *link) changesHolding(ev outEvent) bool {
	if ev.key.Kind == resource.Zone {
		return true
	}
	switch ev.typ {
	case store.EventPut:
		return l.outcome(ev.put) != skip
	case store.EventDelete:
		return ev.tombOK
	}
	return false
}

// resumePoint returns the revision to follow the feed from, or full when
// the peer's position belongs to another store (another epoch) or lies
// beyond this store's revision (the store was replaced).
func (l *link) resumePoint(ctx context.Context, from Position) (int64, bool, error) {
	if from.Revision == 0 {
		return 0, false, nil // the peer has nothing yet: the whole feed
	}
	if from.Epoch != l.epoch {
		l.log.Info("the peer's position is of another store; sending a full state", "peer", l.peer, "epoch", from.Epoch, "ours", l.epoch)
		return 0, true, nil
	}
	_, cur, err := l.st.List(ctx, resource.Mesh)
	if err != nil {
		return 0, false, fmt.Errorf("read the store's revision: %w", err)
	}
	if from.Revision > cur {
		l.log.Info("the peer's position is ahead of this store; sending a full state", "peer", l.peer, "revision", from.Revision, "ours", cur)
		return 0, true, nil
	}
	return from.Revision, false, nil
}

// batcher packs puts and deletes into batches of at most batchBytes and
// batchItems. It keeps one operation per key, the last: a receiver applies
// a batch's puts and deletions in no order between them (a put of a key
// wins over its deletion), so a batch that held a resource's creation and
// its deletion would leave the peer holding it. Events of one key meet in
// one batch where the sender reads several reads of its store as one page:
// the global's shared window (sharedFeed), and the events an inventory
// follows (sendInventory).
type batcher struct {
	l    *link
	puts [][]byte // nil where dropped
	dels []resource.Key
	// at is where a key's operation is: its index in puts, or ^index in
	// dels
	at       map[resource.Key]int
	dropped  int
	size     int
	snapshot bool
	sent     bool
}

func (b *batcher) items() int { return len(b.puts) + len(b.dels) - b.dropped }

func (b *batcher) full() bool {
	return b.size >= batchBytes || b.items() >= batchItems
}

// drop removes what the batch holds for k.
func (b *batcher) drop(k resource.Key) {
	i, ok := b.at[k]
	if !ok {
		return
	}
	delete(b.at, k)
	if i >= 0 {
		b.size -= len(b.puts[i]) + 4
		b.puts[i] = nil
	} else {
		b.size -= keySize(b.dels[^i])
		b.dels[^i] = resource.Key{}
	}
	b.dropped++
}

func (b *batcher) put(k resource.Key, wire []byte) {
	if b.at == nil {
		b.at = map[resource.Key]int{}
	}
	b.drop(k)
	b.at[k] = len(b.puts)
	b.puts = append(b.puts, wire)
	b.size += len(wire) + 4
}

func (b *batcher) del(k resource.Key) {
	if b.at == nil {
		b.at = map[resource.Key]int{}
	}
	b.drop(k)
	b.at[k] = ^len(b.dels)
	b.dels = append(b.dels, k)
	b.size += keySize(k)
}

func keySize(k resource.Key) int { return len(k.Kind) + len(k.Mesh) + len(k.Name) + 8 }

// flush sends what is packed as a batch bringing the peer to revision.
func (b *batcher) flush(ctx context.Context, revision int64, last bool) error {
	if b.items() == 0 && !last {
		return nil
	}
	puts, dels := b.puts, b.dels
	if b.dropped > 0 {
		puts = slices.DeleteFunc(puts, func(p []byte) bool { return p == nil })
		dels = slices.DeleteFunc(dels, func(k resource.Key) bool { return k == resource.Key{} })
	}
	enc := encodeChanges(revision, b.snapshot, last && b.snapshot, puts, dels)
	n := b.items()
	b.puts, b.dels, b.at, b.dropped, b.size = nil, nil, nil, 0, 0
	b.sent = true
	// The peer acknowledges a full state once, after its last batch (its
	// position moves only then): waiting for acknowledgements between the
	// batches of one would wait for good once more than maxInFlight are
	// sent. Those batches wait on gRPC's flow control and the peer's
	// bounded inbox instead.
	return b.l.sendBatch(ctx, revision, n, enc, !b.snapshot || last)
}

// sendEvents sends what the peer gets of evs, which follow revision from
// in the feed; it reports whether it sent anything. A batch fills up
// within an event too (a Zone's related services are thousands): such a
// batch brings the peer only to the revision before the event, so that a
// peer that resumes from it gets the whole event again.
func (l *link) sendEvents(ctx context.Context, from int64, evs []outEvent) (bool, error) {
	b := &batcher{l: l}
	covered := from // the revision the batch packed so far brings the peer to
	flushFull := func() error {
		if !b.full() {
			return nil
		}
		return b.flush(ctx, covered, false)
	}
	for i := range evs {
		ev := &evs[i]
		objs := l.side.related(ctx, store.Event{Type: ev.typ, Revision: ev.rev, Key: ev.key})
		switch ev.typ {
		case store.EventPut:
			l.add(b, ev.put, false)
		case store.EventDelete:
			if l.echo(ev.key) {
				break
			}
			if ev.tombOK {
				l.forget(ev.tomb)
				b.del(ev.tomb)
			}
		}
		for _, obj := range objs {
			if err := flushFull(); err != nil {
				return b.sent, err
			}
			it, err := l.side.prepare(obj)
			if err != nil {
				return b.sent, err
			}
			l.add(b, it, false)
		}
		covered = ev.rev
		if err := flushFull(); err != nil {
			return b.sent, err
		}
	}
	err := b.flush(ctx, covered, false)
	return b.sent, err
}

// What sending an item does (link.outcome).
const (
	skip     = iota // nothing: not for the peer, or sent as it is already
	putIt           // the peer stores it
	deleteIt        // the peer deletes it
)

// outcome says what sending it does to the peer.
func (l *link) outcome(it *outItem) int {
	if it == nil {
		return skip
	}
	send, asDelete := l.side.pass(it)
	switch {
	case !send:
		return skip
	case asDelete || it.wire == nil:
		return deleteIt
	case l.digests[it.keyHash] != it.digest:
		// Status writes on one side change nothing the other side of a
		// global-to-zone stream gets, and cost no bytes.
		return putIt
	}
	return skip
}

// add packs what the peer gets of it, unless the peer got exactly that
// already on this stream. A full state (snapshot) sends no deletions.
func (l *link) add(b *batcher, it *outItem, snapshot bool) {
	switch l.outcome(it) {
	case deleteIt:
		if !snapshot {
			l.forget(it.key)
			b.del(it.key)
		}
	case putIt:
		l.digests[it.keyHash] = it.digest
		b.put(it.key, it.wire)
	}
}

func keyHash(k resource.Key) uint64 {
	h := fnv.New64a()
	h.Write([]byte(k.Kind))
	h.Write([]byte{0})
	h.Write([]byte(k.Mesh))
	h.Write([]byte{0})
	h.Write([]byte(k.Name))
	return h.Sum64()
}

func (l *link) forget(k resource.Key) { delete(l.digests, keyHash(k)) }

// sendSnapshot sends the full state the peer gets and returns the revision
// to follow the feed from. It lists kind by kind; the revision is the first
// list's, so the feed that follows repeats what changed during the lists
// (applying it again changes nothing).
func (l *link) sendSnapshot(ctx context.Context) (int64, error) {
	l.digests = map[uint64]uint64{}
	b := &batcher{l: l, snapshot: true}
	rev := int64(-1)
	for _, d := range resource.Descriptors() {
		objs, r, err := l.st.List(ctx, d.Kind)
		if err != nil {
			return 0, fmt.Errorf("list %s for a full state: %w", d.Kind, err)
		}
		if rev < 0 {
			rev = r
		}
		for _, obj := range objs {
			it, err := l.side.prepare(obj)
			if err != nil {
				return 0, err
			}
			l.add(b, it, true)
			if b.full() {
				if err := b.flush(ctx, rev, false); err != nil {
					return 0, err
				}
			}
		}
	}
	if err := b.flush(ctx, rev, true); err != nil {
		return 0, err
	}
	l.stats.snapshotSent()
	return rev, nil
}

// sendBatch sends one batch, encoded as b, of items resources bringing the
// peer to revision; with acked, once fewer than maxInFlight are
// unacknowledged, and counted among them until the peer acknowledges it.
func (l *link) sendBatch(ctx context.Context, revision int64, items int, b []byte, acked bool) error {
	if acked {
		l.ackMu.Lock()
		for len(l.inflight) >= maxInFlight && ctx.Err() == nil {
			l.ackCond.Wait()
		}
		if ctx.Err() != nil {
			l.ackMu.Unlock()
			return nil
		}
		l.inflight = append(l.inflight, revision)
		l.ackMu.Unlock()
	}
	if err := l.sendEnvelope(&pb.Envelope{Body: &pb.Envelope_Changes{Changes: b}}); err != nil {
		return fmt.Errorf("send a batch: %w", err)
	}
	l.stats.sent(revision, int64(items), int64(len(b)))
	return nil
}

// acked records the peer's acknowledgement of revision.
func (l *link) acked(revision int64) {
	l.ackMu.Lock()
	i := 0
	for i < len(l.inflight) && l.inflight[i] <= revision {
		i++
	}
	l.inflight = l.inflight[i:]
	l.ackCond.Broadcast()
	l.ackMu.Unlock()
	l.stats.acked(revision)
}
