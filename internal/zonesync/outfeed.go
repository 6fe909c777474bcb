package zonesync

import (
	"context"
	"hash/fnv"
	"sort"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// outItem is what a peer gets of one stored resource, in wire form. It is
// computed once and read by every stream that sends it (on the global, the
// streams of all zones), so it is never changed once made.
type outItem struct {
	key     resource.Key // the resource's key on the peer
	keyHash uint64       // keyHash(key)
	// wire is the resource's encoding (pb.Resource, deterministic), nil
	// when the peer is to delete key (a service no longer exported).
	wire   []byte
	digest uint64 // FNV-1a of wire: a stream sends a key again only when it changed
	// from is the zone a MeshService came from, "" for other resources
	// (see globalOut.forZone).
	from string
}

// newOutItem encodes out, a resource the peer gets.
func newOutItem(out *resource.Object, from string) (*outItem, error) {
	r, err := encodeResource(out)
	if err != nil {
		return nil, err
	}
	wire, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write(wire)
	k := out.Key()
	return &outItem{key: k, keyHash: keyHash(k), wire: wire, digest: h.Sum64(), from: from}, nil
}

// deleteItem is the deletion of k on the peer.
func deleteItem(k resource.Key, from string) *outItem {
	return &outItem{key: k, keyHash: keyHash(k), from: from}
}

// outEvent is one event of this store's feed as the sender handles it:
// the stored key and revision (related reads them), and what the peer
// gets of it (put: a resource or a deletion, nil for nothing; tomb: the
// peer's key of a deleted resource, when tombOK).
type outEvent struct {
	typ    store.EventType
	rev    int64
	key    resource.Key
	put    *outItem
	tomb   resource.Key
	tombOK bool
}

// size is about what e holds in memory.
func (e *outEvent) size() int {
	n := 96
	if e.put != nil {
		n += len(e.put.wire) + 64
	}
	return n
}

// prepare turns feed events into outEvents with the side's prepare.
func prepare(s side, evs []store.Event) ([]outEvent, error) {
	out := make([]outEvent, len(evs))
	for i, ev := range evs {
		o := outEvent{typ: ev.Type, rev: ev.Revision, key: ev.Key}
		switch ev.Type {
		case store.EventPut:
			if ev.Object == nil {
				break // the reader has no use for it (store.Known): nothing for the peer
			}
			it, err := s.prepare(ev.Object)
			if err != nil {
				return nil, err
			}
			o.put = it
		case store.EventDelete:
			o.tomb, o.tombOK = s.outTombstone(ev.Key)
		}
		out[i] = o
	}
	return out, nil
}

// feedReader reads this store's feed for one stream's sender.
type feedReader interface {
	// changes returns up to limit events after revision after, or
	// store.ErrCompacted.
	changes(ctx context.Context, after int64, limit int) ([]outEvent, error)
	// close ends the stream's reading.
	close()
}

// directFeed reads the store's feed for one stream (a zone's).
type directFeed struct {
	st    store.Store
	side  side
	known store.Known // the puts the sender holds already (readChanges)
}

func (f directFeed) changes(ctx context.Context, after int64, limit int) ([]outEvent, error) {
	evs, err := readChanges(ctx, f.st, after, limit, f.known)
	if err != nil {
		return nil, err
	}
	return prepare(f.side, evs)
}

// readChanges reads st's feed, taking from known (when not nil) the puts
// the sender holds already, where st can (store.KnownFeed): most of what
// a sender reads is in its cache, decoded, or of no use to its peer.
func readChanges(ctx context.Context, st store.Store, after int64, limit int, known store.Known) ([]store.Event, error) {
	if kf, ok := st.(store.KnownFeed); ok && known != nil {
		return kf.ChangesKnown(ctx, after, limit, known)
	}
	return st.Changes(ctx, after, limit)
}

func (directFeed) close() {}

// sharedFeed is the global's feed as every zone's stream reads it: read
// from the store and turned into wire form (globalOut.shared) once, not
// once per zone, and kept for the streams that follow. The streams of a
// global move through its feed at about the same pace (in an initial sync,
// all from the start), so the window between the slowest stream within it
// and the newest event read serves them all. The window holds at most
// maxBytes of resources; a stream behind it reads the store itself, as it
// would without the window.
type sharedFeed struct {
	st             store.Store
	known          store.Known // see readChanges
	side           side        // zone-independent: prepare and outTombstone only
	maxBytes, keep int

	readMu sync.Mutex // one stream at a time reads the store to extend the window

	mu      sync.Mutex
	valid   bool
	lo, hi  int64      // the window holds every event in (lo, hi]
	evs     []outEvent // in revision order
	bytes   int        // about what evs hold (outEvent.size)
	cursors map[*sharedCursor]int64
}

// sharedFeedBytes bounds the window of a global's sharedFeed, and
// sharedFeedKeep is what it keeps of what every stream is past, for
// streams that connect a little later (zones starting together).
const (
	sharedFeedBytes = 128 << 20
	sharedFeedKeep  = 8 << 20
)

func newSharedFeed(st store.Store, known store.Known, s side, maxBytes, keep int) *sharedFeed {
	return &sharedFeed{st: st, known: known, side: s, maxBytes: maxBytes, keep: keep, cursors: map[*sharedCursor]int64{}}
}

// sharedCursor is one stream's reader of a sharedFeed: where it is tells
// the feed which events no stream needs any more.
type sharedCursor struct {
	f *sharedFeed
	// started is set after the stream's first read, which is always the
	// store's: a stream resuming from a revision the store's feed was
	// compacted past must get store.ErrCompacted (and send a full state),
	// though the window may still hold what followed that revision.
	started bool
}

func (f *sharedFeed) reader() *sharedCursor {
	c := &sharedCursor{f: f}
	f.mu.Lock()
	f.cursors[c] = -1
	f.mu.Unlock()
	return c
}

func (c *sharedCursor) close() {
	c.f.mu.Lock()
	delete(c.f.cursors, c)
	c.f.mu.Unlock()
}

func (c *sharedCursor) changes(ctx context.Context, after int64, limit int) ([]outEvent, error) {
	return c.f.changes(ctx, c, after, limit)
}

// window returns the events after after that the window holds, when it
// covers after and holds something past it; the slice is read-only.
func (f *sharedFeed) window(c *sharedCursor, after int64, limit int) ([]outEvent, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cursors[c] = after
	if !f.valid || after < f.lo || after >= f.hi {
		return nil, false
	}
	i := sort.Search(len(f.evs), func(i int) bool { return f.evs[i].rev > after })
	j := min(len(f.evs), i+limit)
	if i == j {
		return nil, false
	}
	return f.evs[i:j:j], true
}

func (f *sharedFeed) changes(ctx context.Context, c *sharedCursor, after int64, limit int) ([]outEvent, error) {
	first := !c.started
	c.started = true
	if !first {
		if evs, ok := f.window(c, after, limit); ok {
			return evs, nil
		}
	}
	f.readMu.Lock()
	defer f.readMu.Unlock()
	if !first {
		if evs, ok := f.window(c, after, limit); ok {
			return evs, nil // another stream read them meanwhile
		}
	}
	f.mu.Lock()
	extend := f.valid && after == f.hi
	reset := !f.valid || (after > f.hi && !f.used())
	f.mu.Unlock()
	raw, err := readChanges(ctx, f.st, after, limit, f.known)
	if err != nil {
		return nil, err
	}
	evs, err := prepare(f.side, raw)
	if err != nil || !(extend || reset) || len(evs) == 0 {
		// Behind the window (or ahead of one other streams use): this
		// stream's own read.
		return evs, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if reset || f.hi != after {
		f.evs, f.bytes, f.lo, f.valid = nil, 0, after, true
	}
	f.evs = append(f.evs, evs...)
	for _, e := range evs {
		f.bytes += e.size()
	}
	f.hi = evs[len(evs)-1].rev
	f.trim()
	return evs[:len(evs):len(evs)], nil
}

// used reports whether a stream reads within the window.
func (f *sharedFeed) used() bool {
	for _, pos := range f.cursors {
		if pos >= f.lo && pos <= f.hi {
			return true
		}
	}
	return false
}

// trim drops the events every stream is past (but the last keep bytes of
// them), and the oldest ones beyond maxBytes. A stream behind the window
// holds it, so that it joins the window when it catches up rather than
// reading the store to the end (a zone slower than the others, a stream
// that resumed); streams that have not read yet do not.
func (f *sharedFeed) trim() {
	low := f.hi
	for _, pos := range f.cursors {
		if pos >= 0 && pos < low {
			low = pos
		}
	}
	n := 0
	for n < len(f.evs) && (f.evs[n].rev <= low && f.bytes > f.keep || f.bytes > f.maxBytes) {
		f.bytes -= f.evs[n].size()
		f.lo = f.evs[n].rev
		n++
	}
	// The array keeps the dropped events until an append outgrows it and
	// moves what is left (slices handed out may still be read: they are
	// not cleared).
	f.evs = f.evs[n:]
}

// encodeChanges is the encoding of a pb.Changes whose puts are already
// encoded, so that a resource sent to several zones is encoded once.
func encodeChanges(revision int64, snapshot, last bool, puts [][]byte, dels []resource.Key) []byte {
	n := 24
	for _, p := range puts {
		n += len(p) + 8
	}
	for _, k := range dels {
		n += len(k.Kind) + len(k.Mesh) + len(k.Name) + 12
	}
	b := make([]byte, 0, n)
	if revision != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(revision))
	}
	if snapshot {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if last {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	for _, p := range puts {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, p)
	}
	for _, k := range dels {
		var kb []byte
		for i, s := range []string{string(k.Kind), k.Mesh, k.Name} {
			if s != "" {
				kb = protowire.AppendTag(kb, protowire.Number(i+1), protowire.BytesType)
				kb = protowire.AppendString(kb, s)
			}
		}
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, kb)
	}
	return b
}
