package zonesync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// side is what differs between the global's end of a stream and a zone's.
type side interface {
	// prepare returns what the peer gets of a stored resource, in wire
	// form: a resource to store, a key to delete, or nil. On global it is
	// the same for every zone and computed once for all their streams
	// (sharedFeed); pass then decides for one stream.
	prepare(obj *resource.Object) (*outItem, error)
	// pass returns whether the peer gets it, and whether as a deletion.
	pass(it *outItem) (send, asDelete bool)
	// outTombstone returns the key the peer deletes when k was deleted here.
	outTombstone(k resource.Key) (resource.Key, bool)
	// related returns more resources to send again after ev (on global, the
	// services of a Zone whose spec.enabled may have changed).
	related(ctx context.Context, ev store.Event) []*resource.Object
	// decode decodes a resource the peer sent (DecodeResource).
	decode(r *pb.Resource) (*resource.Object, error)
	// accept checks and transforms a resource the peer sent.
	accept(obj *resource.Object) (*resource.Object, error)
	// writer is who the peer is to admission.
	writer() admission.Writer
	// resolve returns the keys here of what the peer deleted as k.
	resolve(k resource.Key) []resource.Key
	// owned returns the keys of everything here that came from the peer.
	owned() []resource.Key
	// keepStatus says whether the status the peer sends is stored.
	keepStatus() bool
	// expected returns what the peer should hold of this side's resources
	// once it has this store's feed up to the cache's revision
	// (inventory.go).
	expected() inventory
}

// Position is how far one side has stored the other side's feed.
type Position struct {
	Epoch    string `json:"epoch"`
	Revision int64  `json:"revision"`
}

func (p Position) wire() *pb.Position { return &pb.Position{Epoch: p.Epoch, Revision: p.Revision} }

func positionOf(p *pb.Position) Position {
	return Position{Epoch: p.GetEpoch(), Revision: p.GetRevision()}
}

// Tuning of a link.
const (
	// pageSize is how many feed events the sender reads at once.
	pageSize = 1000
	// maxInFlight is how many batches the sender sends ahead of the
	// peer's acknowledgements: with the store as the buffer, a slow peer
	// costs no memory beyond these and gRPC's windows.
	maxInFlight = 8
	// silentBeats is how many heartbeats a peer may miss before the
	// stream is given up.
	silentBeats = 3
	// inboxSize bounds batches received and not applied yet; past it the
	// reader stops reading and gRPC's flow control holds the peer back.
	inboxSize = 4
)

// link is one stream between the global and a zone, from one end: it sends
// this store's feed (sender) and applies the peer's (receiver).
type link struct {
	peer      string // "global", or the zone's name
	admit     *admission.Admitter
	st        store.Store
	cache     *cache.Cache
	side      side
	feed      feedReader // this store's feed, as this stream reads it
	epoch     string     // this store's epoch
	peerEpoch string     // the peer store's epoch, recorded with acks
	ackLease  string     // the lease recording how far this store has the peer's feed
	heartbeat time.Duration
	log       *slog.Logger
	stats     *stats
	// inventories says the peer understands Inventory and
	// FullStateRequest (inventory.go).
	inventories bool

	sendMu   sync.Mutex
	lastSend atomic.Int64 // unix nanoseconds of the last message sent
	send     func(*pb.Envelope) error
	recv     func() (*pb.Envelope, error)

	// echoes are the keys this link's receiver deleted: the sender does
	// not send those deletions back.
	echoMu sync.Mutex
	echoes map[resource.Key]bool

	ackMu    sync.Mutex
	ackCond  *sync.Cond
	inflight []int64 // revisions sent and not acknowledged, in order
	digests  map[uint64]uint64

	// fullWanted holds a full state the peer asked for (inventory.go).
	fullWanted chan struct{}
	// creator, when set, stores what the peer sends that is new here and of
	// a kind it decides, with its status (a zone naming what it receives).
	creator admission.Creator

	// receiver state (its goroutine only)
	lastWrite int64
	seen      map[resource.Key]bool // keys of the snapshot being received
}

func (l *link) init() {
	l.ackCond = sync.NewCond(&l.ackMu)
	l.digests = map[uint64]uint64{}
	l.fullWanted = make(chan struct{}, 1)
	l.echoes = map[resource.Key]bool{}
}

// maxEchoes bounds the echo set; past it the set is dropped, which costs
// only deletions sent back that the peer finds nothing to do for.
const maxEchoes = 100_000

func (l *link) deletedByPeer(keys []resource.Key) {
	l.echoMu.Lock()
	defer l.echoMu.Unlock()
	if len(l.echoes)+len(keys) > maxEchoes {
		clear(l.echoes)
	}
	for _, k := range keys {
		l.echoes[k] = true
	}
}

// echo reports whether this link's receiver deleted k, and forgets it.
func (l *link) echo(k resource.Key) bool {
	l.echoMu.Lock()
	defer l.echoMu.Unlock()
	if l.echoes[k] {
		delete(l.echoes, k)
		return true
	}
	return false
}

// run serves the stream until it fails or ctx ends: from is how far the
// peer has this store's feed.
func (l *link) run(ctx context.Context, from Position) error {
	l.init()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inbox := make(chan received, inboxSize)
	msgs := make(chan *pb.Envelope)
	recvErr := make(chan error, 1)
	// The reader is not waited for: on the server Recv returns only once
	// the handler has returned. While it waits to hand a message on (this
	// side is applying and holds the peer back), the peer is not silent.
	var lastRecv atomic.Int64
	var handing atomic.Bool
	lastRecv.Store(time.Now().UnixNano())
	go func() {
		for {
			env, err := l.recv()
			if err != nil {
				recvErr <- err
				return
			}
			lastRecv.Store(time.Now().UnixNano())
			handing.Store(true)
			select {
			case msgs <- env:
			case <-ctx.Done():
				return
			}
			handing.Store(false)
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(inbox)
		for {
			select {
			case <-gctx.Done():
				return nil
			case err := <-recvErr:
				return fmt.Errorf("receive: %w", err)
			case env := <-msgs:
				l.stats.seen()
				if err := l.dispatch(gctx, env, inbox); err != nil {
					return err
				}
			}
		}
	})
	g.Go(func() error {
		// The watchdog and the heartbeat: an idle side shows it is there,
		// and a peer silent for silentBeats heartbeats is given up.
		t := time.NewTicker(l.heartbeat / 2)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
			}
			if silent := time.Since(time.Unix(0, lastRecv.Load())); !handing.Load() && silent > silentBeats*l.heartbeat {
				return fmt.Errorf("%s sent nothing for %s (%d heartbeats)", l.peer, silent.Round(time.Millisecond), silentBeats)
			}
			if time.Since(time.Unix(0, l.lastSend.Load())) >= l.heartbeat {
				if err := l.sendEnvelope(&pb.Envelope{Body: &pb.Envelope_Heartbeat{Heartbeat: &pb.Heartbeat{}}}); err != nil {
					return fmt.Errorf("send heartbeat: %w", err)
				}
			}
		}
	})
	go func() {
		// A sender waiting for acknowledgements must see the end too.
		<-gctx.Done()
		l.ackMu.Lock()
		l.ackCond.Broadcast()
		l.ackMu.Unlock()
	}()
	positions := make(chan int64, 1)
	g.Go(func() error { return l.applyLoop(gctx, inbox, positions) })
	g.Go(func() error { return l.positionLoop(gctx, positions) })
	g.Go(func() error { return l.sendLoop(gctx, from) })
	return g.Wait()
}

// received is a message the receiver applies in the stream's order: a
// batch or an inventory.
type received struct {
	changes   []byte
	inventory *pb.Inventory
}

func (l *link) dispatch(ctx context.Context, env *pb.Envelope, inbox chan<- received) error {
	var in received
	switch b := env.Body.(type) {
	case *pb.Envelope_Changes:
		in.changes = b.Changes
	case *pb.Envelope_Inventory:
		in.inventory = b.Inventory
	case *pb.Envelope_FullStateRequest:
		l.log.Info("the peer asked for a full state", "peer", l.peer, "reason", b.FullStateRequest.GetReason())
		select {
		case l.fullWanted <- struct{}{}:
		default: // one is wanted already
		}
	case *pb.Envelope_Ack:
		l.acked(b.Ack.GetRevision())
	case *pb.Envelope_Heartbeat:
	case *pb.Envelope_Rejection:
		r := b.Rejection
		l.log.Warn("the peer refused what this side sent", "peer", l.peer, "kind", r.GetKey().GetKind(),
			"mesh", r.GetKey().GetMesh(), "name", r.GetKey().GetName(), "revision", r.GetRevision(), "reason", r.GetReason())
	case nil:
		// A message this version does not know, from a newer peer: that
		// peer sends such messages only where they may be ignored.
		l.log.Debug("ignored a message of a kind this version does not know", "peer", l.peer)
	default:
		return fmt.Errorf("unexpected %T from %s after the handshake", env.Body, l.peer)
	}
	if in.changes != nil || in.inventory != nil {
		select {
		case inbox <- in:
		case <-ctx.Done():
		}
	}
	return nil
}

func (l *link) sendEnvelope(env *pb.Envelope) error {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	l.lastSend.Store(time.Now().UnixNano())
	return l.send(env)
}

// ---- sender ----

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
	inventorySent := false
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
				inventorySent = false // and check that it repaired what differed
			}
		}
		evs, err := l.feed.changes(ctx, rev, pageSize)
		switch {
		case errors.Is(err, store.ErrCompacted):
			l.log.Info("the change feed was compacted past the peer's revision; sending a full state", "peer", l.peer, "revision", rev)
			if rev, err = l.sendSnapshot(ctx); err != nil {
				return err
			}
			sentRev, lastSend = rev, time.Now()
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
				if err := l.sendBatch(ctx, rev, 0, encodeChanges(rev, false, false, nil, nil)); err != nil {
					return err
				}
				sentRev, lastSend = rev, time.Now()
			}
			if l.inventories && !inventorySent && time.Since(lastChange) >= l.heartbeat {
				to, sent, ok, err := l.sendInventory(ctx, rev)
				if err != nil {
					return err
				}
				if sent {
					sentRev, lastSend, lastChange = to, time.Now(), time.Now()
				}
				rev, inventorySent = to, ok
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
// batchItems.
type batcher struct {
	l        *link
	puts     [][]byte
	dels     []resource.Key
	size     int
	snapshot bool
	sent     bool
}

func (b *batcher) items() int { return len(b.puts) + len(b.dels) }

func (b *batcher) full() bool {
	return b.size >= batchBytes || b.items() >= batchItems
}

func (b *batcher) put(wire []byte) {
	b.puts = append(b.puts, wire)
	b.size += len(wire) + 4
}

func (b *batcher) del(k resource.Key) {
	b.dels = append(b.dels, k)
	b.size += len(k.Kind) + len(k.Mesh) + len(k.Name) + 8
}

// flush sends what is packed as a batch bringing the peer to revision.
func (b *batcher) flush(ctx context.Context, revision int64, last bool) error {
	if b.items() == 0 && !last {
		return nil
	}
	enc := encodeChanges(revision, b.snapshot, last && b.snapshot, b.puts, b.dels)
	n := b.items()
	b.puts, b.dels, b.size = nil, nil, 0
	b.sent = true
	return b.l.sendBatch(ctx, revision, n, enc)
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
		b.put(it.wire)
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
// peer to revision, once fewer than maxInFlight are unacknowledged.
func (l *link) sendBatch(ctx context.Context, revision int64, items int, b []byte) error {
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

// ---- receiver ----

func (l *link) applyLoop(ctx context.Context, inbox <-chan received, positions chan int64) error {
	defer close(positions)
	for in := range inbox {
		if in.inventory != nil {
			if err := l.checkInventory(ctx, in.inventory); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			continue
		}
		raw := in.changes
		c, err := DecodeChanges(raw)
		if err != nil {
			l.refused(ctx, 0, nil, err)
			// What the batch carried is lost to this side, and the
			// batches after it will move the position past it.
			if err := l.askFullState(fmt.Sprintf("this side refused a whole batch: %v", err)); err != nil {
				return err
			}
			continue
		}
		if err := l.apply(ctx, c, int64(len(raw))); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if c.Snapshot && !c.Last {
			continue // the position moves once the whole snapshot is in
		}
		// Hand the position to positionLoop, replacing one it has not taken
		// yet: only the latest matters.
		select {
		case positions <- c.Revision:
		default:
			select {
			case <-positions:
			default:
			}
			positions <- c.Revision
		}
	}
	return nil
}

// checkInventory compares what this side holds of the peer's resources,
// everything the peer sent before inv being written, with inv, and asks
// for a full state when they differ.
func (l *link) checkInventory(ctx context.Context, inv *pb.Inventory) error {
	if err := l.cache.WaitFor(ctx, l.lastWrite); err != nil {
		return err
	}
	held := heldInventory(l.side)
	if held.count == inv.GetCount() && held.sum == inv.GetSum() {
		l.log.Debug("this side holds what the peer sent", "peer", l.peer, "resources", held.count, "revision", inv.GetRevision())
		return nil
	}
	reason := fmt.Sprintf("this side holds %d of the peer's resources, the peer's inventory at revision %d names %d", held.count, inv.GetRevision(), inv.GetCount())
	if held.count == inv.GetCount() {
		reason = fmt.Sprintf("this side holds %d of the peer's resources, as many as the peer's inventory at revision %d names, but not the same ones", held.count, inv.GetRevision())
	}
	l.log.Warn("what this side holds of the peer's differs from the peer's inventory; asking for a full state", "peer", l.peer, "reason", reason)
	return l.askFullState(reason)
}

// askFullState asks the peer for a full state (it sends at most one per
// stream).
func (l *link) askFullState(reason string) error {
	if !l.inventories {
		return nil // the peer would not understand
	}
	if err := l.sendEnvelope(&pb.Envelope{Body: &pb.Envelope_FullStateRequest{FullStateRequest: &pb.FullStateRequest{Reason: reason}}}); err != nil {
		return fmt.Errorf("ask for a full state: %w", err)
	}
	return nil
}

// positionLoop records how far this store has the peer's feed and then
// acknowledges it. It runs beside applyLoop, so that the position's write
// overlaps the next batch's, and the store commits both in one transaction
// when they meet; it is written only after the batch it covers.
func (l *link) positionLoop(ctx context.Context, positions <-chan int64) error {
	for rev := range positions {
		if err := l.savePosition(ctx, rev); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		l.stats.received(rev, 0, 0)
		if err := l.sendEnvelope(&pb.Envelope{Body: &pb.Envelope_Ack{Ack: &pb.Ack{Revision: rev}}}); err != nil {
			return fmt.Errorf("send an ack: %w", err)
		}
	}
	return nil
}

// refused counts and logs a refusal and tells the peer.
func (l *link) refused(ctx context.Context, revision int64, key *resource.Key, err error) {
	l.stats.refused(refusalReason(err), err)
	args := []any{"peer", l.peer, "reason", refusalReason(err), "err", err}
	if key != nil {
		args = append(args, "kind", key.Kind, "mesh", key.Mesh, "name", key.Name)
	}
	l.log.Warn("refused what the peer sent", args...)
	rej := &pb.Rejection{Revision: revision, Reason: err.Error()}
	if key != nil {
		rej.Key = wireKey(*key)
	}
	if ctx.Err() == nil {
		_ = l.sendEnvelope(&pb.Envelope{Body: &pb.Envelope_Rejection{Rejection: rej}})
	}
}

// apply stores one batch: puts and deletes the peer may make. Only once
// they are all written does positionLoop record how far this store has the
// peer's feed (so a crash in between makes the peer send the batch again,
// which changes nothing the second time) and acknowledge it.
func (l *link) apply(ctx context.Context, c *pb.Changes, size int64) error {
	if err := l.cache.WaitFor(ctx, l.lastWrite); err != nil {
		return err
	}
	if c.Snapshot && l.seen == nil {
		l.seen = map[resource.Key]bool{}
	}
	var puts []*resource.Object
	index := make(map[resource.Key]int, len(c.Put))
	for _, r := range c.Put {
		obj, err := l.side.decode(r)
		if err == nil {
			obj, err = l.side.accept(obj)
		}
		if err == nil {
			if errs := l.admit.Admit(obj, l.side.writer()); len(errs) > 0 {
				err = refuse("invalid", "%s: %v", obj.Key(), errs)
			}
		}
		if err != nil {
			k := resource.Key{Kind: resource.Kind(r.GetKind()), Mesh: r.GetMesh(), Name: r.GetName()}
			l.refused(ctx, c.Revision, &k, err)
			continue
		}
		if i, dup := index[obj.Key()]; dup {
			puts[i] = obj // a later put of the same key wins
			continue
		}
		index[obj.Key()] = len(puts)
		puts = append(puts, obj)
		if l.seen != nil {
			l.seen[obj.Key()] = true
		}
	}
	var dels []resource.Key
	for _, wk := range c.Delete {
		k, err := decodeKey(wk)
		if err != nil {
			l.refused(ctx, c.Revision, nil, err)
			continue
		}
		for _, target := range l.side.resolve(k) {
			if _, put := index[target]; !put {
				dels = append(dels, target)
			}
		}
	}
	if err := l.write(ctx, c.Revision, puts, dels); err != nil {
		return err
	}
	if c.Snapshot && c.Last {
		if err := l.cache.WaitFor(ctx, l.lastWrite); err != nil {
			return err
		}
		var stale []resource.Key
		for _, k := range l.side.owned() {
			if !l.seen[k] {
				stale = append(stale, k)
			}
		}
		l.seen = nil
		if len(stale) > 0 {
			l.log.Info("a full state from the peer left resources out; deleting them", "peer", l.peer, "count", len(stale))
		}
		if err := l.write(ctx, c.Revision, nil, stale); err != nil {
			return err
		}
		l.stats.snapshotReceived()
	}
	l.stats.received(0, int64(len(c.Put)+len(c.Delete)), size)
	return nil
}

func (l *link) savePosition(ctx context.Context, revision int64) error {
	v, _ := json.Marshal(Position{Epoch: l.peerEpoch, Revision: revision})
	rs, err := l.st.Apply(ctx, store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: l.ackLease, Value: v}})
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		return fmt.Errorf("record the peer's revision %d: %w", revision, err)
	}
	return nil
}

// maxWriteRounds bounds how often a write that lost a race (a controller
// wrote the resource's status in between) is tried again with what the
// store holds.
const maxWriteRounds = 8

// write stores puts and deletes; an operation that lost a race is tried
// again with the store's current state. New resources the creator decides
// are stored through it, after the rest (which may hold what names them).
func (l *link) write(ctx context.Context, revision int64, puts []*resource.Object, dels []resource.Key) error {
	fresh := false
	for round := 0; len(puts)+len(dels) > 0; round++ {
		if round == maxWriteRounds {
			return fmt.Errorf("writing %d resources from %s kept losing races with other writers", len(puts)+len(dels), l.peer)
		}
		var ops []store.Op
		var opPut []int // index into puts of each op, -1 for deletes
		var opDel []int
		var created []store.Creation // by the creator
		var createdPut []int
		for i, obj := range puts {
			cur, err := l.current(ctx, obj.Key(), fresh)
			if err != nil {
				return err
			}
			if cur == nil && l.creator != nil && !l.side.keepStatus() && l.creator.Decides(obj.Kind) {
				created = append(created, store.Creation{Object: obj})
				createdPut = append(createdPut, i)
				continue
			}
			for _, op := range l.putOps(ctx, revision, obj, cur) {
				ops = append(ops, op)
				opPut = append(opPut, i)
				opDel = append(opDel, -1)
			}
		}
		for i, k := range dels {
			cur, err := l.current(ctx, k, fresh)
			if err != nil {
				return err
			}
			if cur == nil || l.admit.Owns(cur, l.side.writer()) != nil {
				continue // gone already, or not the peer's to delete
			}
			ops = append(ops, store.Op{Type: store.OpDelete, Key: k, Version: cur.Version})
			opPut = append(opPut, -1)
			opDel = append(opDel, i)
		}
		if len(ops)+len(created) == 0 {
			return nil
		}
		var retryPuts []*resource.Object
		var retryDels []resource.Key
		var deleted []resource.Key
		retried := map[int]bool{}
		// took takes in r, the result of writing puts[put] or deleting
		// dels[del] (-1 for neither), k's.
		took := func(r store.Result, put, del int, k resource.Key) {
			if r.Revision > l.lastWrite {
				l.lastWrite = r.Revision
			}
			switch {
			case r.Err == nil:
				if del >= 0 {
					deleted = append(deleted, dels[del])
				}
			case errors.Is(r.Err, store.ErrConflict) || errors.Is(r.Err, store.ErrAlreadyExists) || errors.Is(r.Err, store.ErrNotFound):
				if put >= 0 && !retried[put] {
					retried[put] = true
					retryPuts = append(retryPuts, puts[put])
				} else if del >= 0 {
					retryDels = append(retryDels, dels[del])
				}
			default:
				l.refused(ctx, revision, &k, refuse("invalid", "%s: %v", k, r.Err))
			}
		}
		if len(ops) > 0 {
			rs, err := l.st.Apply(ctx, ops...)
			if err != nil {
				return fmt.Errorf("store what %s sent: %w", l.peer, err)
			}
			for j, r := range rs {
				k := ops[j].Key
				if ops[j].Object != nil {
					k = ops[j].Object.Key()
				}
				took(r, opPut[j], opDel[j], k)
			}
		}
		if len(created) > 0 {
			// What this batch stored above may name them (a generator that
			// came with the services it selects): decided over it.
			for j := range created {
				created[j].After = l.lastWrite
			}
			rs, ok, err := l.creator.Create(ctx, created)
			if err == nil && !ok {
				// No controllers run here: plain creates, named later.
				cops := make([]store.Op, len(created))
				for j, c := range created {
					cops[j] = l.putOps(ctx, revision, c.Object, nil)[0]
				}
				rs, err = l.st.Apply(ctx, cops...)
			}
			if err != nil {
				return fmt.Errorf("store what %s sent: %w", l.peer, err)
			}
			for j, r := range rs {
				took(r, createdPut[j], -1, created[j].Object.Key())
			}
		}
		if len(deleted) > 0 {
			l.deletedByPeer(deleted)
		}
		puts, dels, fresh = retryPuts, retryDels, true
	}
	return nil
}

// current returns what is stored at k, from the cache, or from the store
// when fresh (after a lost race); nil when nothing is. It is read only
// (the cache's own object).
func (l *link) current(ctx context.Context, k resource.Key, fresh bool) (*resource.Object, error) {
	if !fresh {
		cur, _ := l.cache.Peek(k)
		return cur, nil
	}
	cur, err := l.st.Get(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return cur, err
}

// putOps returns the writes that make the store hold obj, given cur.
func (l *link) putOps(ctx context.Context, revision int64, obj, cur *resource.Object) []store.Op {
	if !l.side.keepStatus() {
		obj.Status = nil
	}
	if cur == nil {
		// obj was decoded for this write: the store may keep it.
		return []store.Op{{Type: store.OpCreate, Object: obj, Handed: true, DiscardObject: true}}
	}
	if err := l.admit.Owns(cur, l.side.writer()); err != nil {
		k := obj.Key()
		l.refused(ctx, revision, &k, refuse("owner", "%v", err))
		return nil
	}
	var ops []store.Op
	version := cur.Version
	if !sameIntent(cur, obj) {
		o := obj.Clone()
		o.Version = version
		ops = append(ops, store.Op{Type: store.OpUpdate, Object: o, Handed: true, DiscardObject: true})
		version++
	}
	if l.side.keepStatus() && !sameJSON(cur.Status, obj.Status) {
		o := obj.Clone()
		o.Version = version
		ops = append(ops, store.Op{Type: store.OpUpdateStatus, Object: o, DiscardObject: true})
	}
	return ops
}

// sameIntent reports whether a and b have the same labels and spec.
func sameIntent(a, b *resource.Object) bool {
	if len(a.Labels) != len(b.Labels) {
		return false
	}
	for k, v := range a.Labels {
		if w, ok := b.Labels[k]; !ok || w != v {
			return false
		}
	}
	return sameJSON(a.Spec, b.Spec)
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
