package zonesync

import (
	"context"
	"fmt"
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
	// resolver returns resolve for the deletions of one batch: the keys
	// here of what the peer deleted as k.
	resolver() func(k resource.Key) []resource.Key
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

// maxInFlight is how many batches the sender sends ahead of the peer's
// acknowledgements: with the store as the buffer, a slow peer costs no
// memory beyond these and gRPC's windows. A variable for the tests.
var maxInFlight = 8

// Tuning of a link.
const (
	// pageSize is how many feed events the sender reads at once.
	pageSize = 1000
	// silentBeats is how many heartbeats a peer may miss before the
	// stream is given up.
	silentBeats = 3
	// inboxSize bounds batches received and not applied yet; past it the
	// reader stops reading and gRPC's flow control holds the peer back.
	inboxSize = 4
	// inventoryEvery is how many heartbeats apart a stream's inventories
	// are at least (a minute at the default heartbeat): a global's
	// inventory reads every service it holds, and a trickle of changes
	// would otherwise have each zone's stream take one every few seconds.
	inventoryEvery = 12
)

// link is one stream between the global and a zone, from one end: it sends
// this store's feed (sender, send.go) and applies the peer's (receiver,
// receive.go), writing what it receives to the store (write.go).
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
	askedFull bool                  // this stream asked the peer for a full state
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
