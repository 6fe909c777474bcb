package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// freshKeys remembers the object keys the writer wrote lately (hashes,
// about as many as the memtable holds), for load: an update of one of
// them (the status write that follows a create through the API) finds its
// row in the memtable with a Get, where a seek of the group's iterator
// positions it in every level of the tree and reads a block of each (a
// fifth of the writer's CPU under rest-load with 100,000 services
// stored). Keys written long ago, such as a first start's pass over every
// service in order, are read by seeking. A hash that collides only makes
// a read take the other way.
type freshKeys struct {
	seen map[uint64]struct{}
}

// maxFresh bounds freshKeys: it forgets everything once it holds that
// many, about what a 16 MiB memtable holds of rest-load's writes.
const maxFresh = 1 << 15

func (f *freshKeys) add(h uint64) {
	if f.seen == nil || len(f.seen) >= maxFresh {
		f.seen = make(map[uint64]struct{}, 1024)
	}
	f.seen[h] = struct{}{}
}

func (f *freshKeys) has(h uint64) bool {
	_, ok := f.seen[h]
	return ok
}

// forget forgets every key (once the memtable is flushed).
func (f *freshKeys) forget() { f.seen = nil }

// maxGroupOps bounds the operations the writer puts in one batch. A single
// request larger than this still gets a batch of its own.
const maxGroupOps = 1000

// Apply implements store.Store (backend.Queue.Apply).
func (s *Store) Apply(ctx context.Context, ops ...store.Op) ([]store.Result, error) {
	return s.queue.Apply(ctx, ops)
}

// commit writes group in one batch and hands it to the syncer (syncLoop),
// which answers its requests once the write-ahead log holds it on disk.
// The writer does not wait for that sync: it builds and applies the next
// group while the disk syncs this one, and pebble's log writer covers the
// groups applied meanwhile with its next sync. Under rest-load the writer
// spent 420 of every 465 µs of a group waiting in Commit, so a group
// waited for the previous one's sync as well as its own. Nothing is
// acknowledged before its sync, and no read shows it: the change feed
// ends at the last synced revision, and Get and List wait for the sync of
// what they read (synced).
//
// A failure to read or apply fails every request of the group (the
// database is the problem); a failed sync fails its group and every group
// after it (syncedRevision.fail): they were applied and may rest on what
// is lost.
func (s *Store) commit(group []*backend.Request) {
	s.writeMu.Lock()
	p := s.writeGroup(group)
	s.inflight.add() // under writeMu, which reopen holds while it waits for none
	s.writeMu.Unlock()
	s.syncs <- p
}

// applied is a group the writer applied (or failed to), waiting for its
// sync in syncLoop.
type applied struct {
	group    []*backend.Request
	outcomes []backend.Outcome
	events   []backend.RecentEvent
	revision int64         // the last revision of the store once the group is synced
	b        *pebble.Batch // nil when nothing was applied
	err      error         // of the group's reads or apply
}

// maxApplied bounds the groups applied and not yet synced: the writer
// waits when the syncer is that far behind.
const maxApplied = 64

// syncLoop answers the applied groups in order once each is synced, until
// syncs is closed, then closes writerDone.
func (s *Store) syncLoop() {
	defer close(s.writerDone)
	defer s.synced.close()
	for p := range s.syncs {
		err := p.err
		if p.b != nil {
			if serr := p.b.SyncWait(); serr != nil && err == nil {
				err = dbErr(fmt.Errorf("sync: %w", serr))
			}
			_ = p.b.Close()
		}
		if err == nil {
			err = s.synced.failure()
		} else if p.b != nil {
			s.synced.fail(err)
			s.disk.wake()
		}
		if err == nil && p.b != nil {
			s.synced.set(p.revision)
			s.recent.Add(p.events)
			if len(p.events) > 0 {
				s.notifier.Notify()
			}
		}
		for i, r := range p.group {
			if err != nil {
				r.Done(backend.Outcome{Err: fmt.Errorf("apply: %w", err)})
				continue
			}
			r.Done(p.outcomes[i])
		}
		s.inflight.done()
	}
}

// syncedRevision is the last revision whose group's log sync completed,
// or the failure of a sync, after which no revision is.
type syncedRevision struct {
	last   atomic.Int64
	mu     sync.Mutex
	cond   *sync.Cond // on mu: last advanced, failed set, or closed
	failed error
	closed bool
}

func (r *syncedRevision) init(rev int64) {
	r.last.Store(rev)
	r.cond = sync.NewCond(&r.mu)
}

func (r *syncedRevision) set(rev int64) {
	r.mu.Lock()
	r.last.Store(rev)
	r.mu.Unlock()
	r.cond.Broadcast()
}

func (r *syncedRevision) fail(err error) {
	r.mu.Lock()
	if r.failed == nil {
		r.failed = err
	}
	r.mu.Unlock()
	r.cond.Broadcast()
}

// reset forgets a failure: the database was reopened at rev.
func (r *syncedRevision) reset(rev int64) {
	r.mu.Lock()
	r.last.Store(rev)
	r.failed = nil
	r.mu.Unlock()
	r.cond.Broadcast()
}

func (r *syncedRevision) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cond.Broadcast()
}

func (r *syncedRevision) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// wait waits until rev is synced; an error when a sync failed first, or
// the store was closed.
func (r *syncedRevision) wait(rev int64) error {
	if r.last.Load() >= rev {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.last.Load() < rev && r.failed == nil && !r.closed {
		r.cond.Wait()
	}
	switch {
	case r.last.Load() >= rev:
		return nil
	case r.failed != nil:
		return r.failed
	default:
		return store.ErrClosed
	}
}

// writeTx is one group being written.
type writeTx struct {
	s     *Store
	b     *pebble.Batch
	now   int64 // Unix nanoseconds, one reading of the clock per group
	clock int64 // the real clock, for fences
	// revision and records are the last revision and record sequence
	// number given out, so far in this group.
	revision, records int64
	// rows and leases are what this group wrote, read before the
	// database: nil for a deleted lease.
	rows   map[string]*row
	leases map[string][]byte
	// frontiers are the streams' record times this group moved forward.
	frontiers map[string]int64
	events    []backend.RecentEvent
	// objects reads the rows of writes that expect one (updates, status
	// writes, deletions), opened at the first: a group's keys mostly come
	// in order (a controller's pass over the cache), and seeking forward
	// reuses the blocks and table iterators the last seek loaded, where a
	// Get per key opened each table anew and read its index again (a
	// tenth of a first start's CPU at 100,000 services). A create, which
	// expects no row, uses Get and its bloom filters.
	objects *pebble.Iterator
	// key and value are the buffers the keys and values written are
	// built in: the batch copies them.
	key, value []byte
}

// set writes key: an object's into the batch, any other table's into the
// group's deferred writes of its table (join).
func (w *writeTx) set(key, value []byte) {
	if key[0] == tObject {
		_ = w.b.Set(key, value, nil)
		return
	}
	w.s.deferred[key[0]].add(key, value, false)
}

// del deletes key, as set writes it.
func (w *writeTx) del(key []byte) {
	if key[0] == tObject {
		_ = w.b.Delete(key, nil)
		return
	}
	w.s.deferred[key[0]].add(key, nil, true)
}

// deferred holds a group's writes to one table, in order, until join.
type deferred struct {
	buf  []byte // the keys and values, one after the other
	ents []deferredEnt
}

type deferredEnt struct {
	key, value int32 // lengths in buf
	del        bool
}

func (d *deferred) add(key, value []byte, del bool) {
	d.buf = append(append(d.buf, key...), value...)
	d.ents = append(d.ents, deferredEnt{key: int32(len(key)), value: int32(len(value)), del: del})
}

// join writes the deferred writes into the batch after the objects',
// table after table, and empties them for the next group. A group writes
// several tables for every resource (the object, its revision, a lease, a
// record and its terms); the memtable inserts a batch's keys in its
// order, and a key next to the last one inserted is found from there,
// where one in another table is searched for from the top. Written table
// by table, the memtable's inserts of a zone's initial sync take half the
// time, and the writer a sixth less in all (BenchmarkApplyNamingBatches).
// Every write of a key is in its table's list in the group's order, so
// the last still wins.
func (w *writeTx) join() {
	for t := range w.s.deferred {
		d := &w.s.deferred[t]
		off := 0
		for _, e := range d.ents {
			key := d.buf[off : off+int(e.key)]
			off += int(e.key)
			if e.del {
				_ = w.b.Delete(key, nil)
				continue
			}
			_ = w.b.Set(key, d.buf[off:off+int(e.value)], nil)
			off += int(e.value)
		}
		if cap(d.buf) > maxDeferredBytes {
			*d = deferred{} // a burst's: let it go
		} else {
			d.buf, d.ents = d.buf[:0], d.ents[:0]
		}
	}
}

// dropDeferred forgets the deferred writes of a group not committed.
func (w *writeTx) dropDeferred() {
	for t := range w.s.deferred {
		d := &w.s.deferred[t]
		d.buf, d.ents = d.buf[:0], d.ents[:0]
	}
}

// maxDeferredBytes bounds the buffer of deferred writes a table keeps
// from group to group: a zone's batch of a thousand services fills its
// largest (the history records) to about 350 KB, and what the writer
// keeps stays under a megabyte a table when idle.
const maxDeferredBytes = 1 << 20

func (s *Store) writeGroup(group []*backend.Request) *applied {
	p := &applied{group: group}
	if p.err = s.synced.failure(); p.err != nil {
		return p
	}
	if p.err = s.disk.refuse(); p.err != nil {
		return p
	}
	w := &writeTx{s: s, b: s.db.NewBatch(), now: s.now().UnixNano(), clock: time.Now().UnixNano(),
		revision: s.revision, records: s.records, rows: map[string]*row{}, leases: map[string][]byte{}}
	defer func() {
		if w.objects != nil {
			_ = w.objects.Close()
		}
		if p.b == nil { // nothing committed
			w.dropDeferred()
			_ = w.b.Close()
		}
	}()
	p.outcomes = make([]backend.Outcome, len(group))
	for i, r := range group {
		if r.Fence != nil {
			current, err := w.fenced(r.Fence)
			if err != nil {
				p.err = err
				return p
			}
			if !current {
				p.outcomes[i] = backend.Fenced(r.Fence)
				continue
			}
		}
		results, err := r.Run(w.apply)
		if err != nil {
			p.err = err
			return p
		}
		p.outcomes[i].Results = results
	}
	if w.records > s.records {
		w.set(metaRecords, u64(uint64(w.records)))
	}
	for stream, at := range w.frontiers {
		w.set(frontierKey(stream), u64(ordered(at)))
	}
	if w.revision > s.revision {
		w.set(metaRevision, u64(uint64(w.revision)))
	}
	w.join()
	if w.b.Empty() {
		return p
	}
	if err := s.db.ApplyNoSyncWait(w.b, pebble.Sync); err != nil {
		p.err = dbErr(fmt.Errorf("commit: %w", err))
		return p
	}
	p.b, p.events, p.revision = w.b, w.events, w.revision
	s.revision, s.records = w.revision, w.records
	for stream, at := range w.frontiers {
		s.frontiers[stream] = at
	}
	return p
}

// fenced reports whether the lease of f holds f's holder and term and has
// not expired by the real clock, as the group left it.
func (w *writeTx) fenced(f *store.Fence) (bool, error) {
	v, ok, err := w.lease(f.Lease)
	if err != nil || !ok {
		return false, err
	}
	expires, value, err := decodeLease(f.Lease, v)
	if err != nil {
		return false, err
	}
	return bytes.Equal(value, f.LeaseValue()) && (expires == 0 || expires > w.clock), nil
}

// apply executes one operation. A failure of the operation is in the
// Result; an error is a failure of the whole group.
func (w *writeTx) apply(op store.Op, p *backend.Prepared) (store.Result, error) {
	switch op.Type {
	case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease:
		return w.applyLease(op)
	case store.OpAppendRecord:
		return w.appendRecord(op)
	}
	if p == nil {
		p = &backend.Prepare([]store.Op{op})[0]
	}
	key, err := p.Key, p.Err
	if err != nil {
		return store.Result{Err: err}, nil
	}
	okey := objectKey(key)
	var cur *row
	if p.EncodeErr == nil {
		if cur, err = w.load(key, okey, op.Type != store.OpCreate); err != nil {
			return store.Result{}, err
		}
	}
	next, err := backend.Next(op, p, cur, w.now)
	if err != nil {
		return store.Result{Err: err}, nil
	}
	next.Revision = w.revision + 1
	w.put(okey, &next, cur)
	w.revision = next.Revision
	ev, err := w.s.recent.Event(op, &next, cur)
	if err != nil {
		return store.Result{}, err
	}
	w.events = append(w.events, ev)
	return backend.WriteResult(op, ev, &next, cur)
}

// load returns the row of key (okey is its object key), live or
// tombstone, or nil: as this group left it, else as stored. expected says
// the write expects a row (it reads through w.objects).
func (w *writeTx) load(key resource.Key, okey []byte, expected bool) (*row, error) {
	if r, ok := w.rows[string(okey)]; ok {
		return r, nil
	}
	h := hashKey(okey)
	if w.s.known.absent(h) {
		return nil, nil
	}
	if expected && !w.s.fresh.has(h) {
		return w.seek(key, okey)
	}
	v, c, err := w.s.db.Get(okey)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr(fmt.Errorf("load %s: %w", key, err))
	}
	defer c.Close()
	return decodeRow(key, v)
}

// seek reads the stored row of key through w.objects. The group's own
// writes are in w.rows; nothing else writes while the group runs
// (writeMu), so the iterator's view is the database's.
func (w *writeTx) seek(key resource.Key, okey []byte) (*row, error) {
	if w.objects == nil {
		it, err := w.s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tObject}, UpperBound: []byte{tObject + 1}})
		if err != nil {
			return nil, dbErr(fmt.Errorf("load %s: %w", key, err))
		}
		w.objects = it
	}
	if !w.objects.SeekGE(okey) || !bytes.Equal(w.objects.Key(), okey) {
		if err := w.objects.Error(); err != nil {
			return nil, dbErr(fmt.Errorf("load %s: %w", key, err))
		}
		return nil, nil
	}
	return decodeRow(key, w.objects.Value())
}

// put writes next over cur (nil when the key has no row): the object, its
// revision key in place of cur's, and the tombstone index.
func (w *writeTx) put(okey []byte, next, cur *row) {
	path := okey[1:]
	if cur != nil {
		w.key = appendRevisionKey(w.key[:0], cur.Revision)
		w.del(w.key)
		if cur.Deleted {
			w.del(tombstoneKey(cur.Modified, cur.Key))
		}
	}
	w.value = appendRow(w.value[:0], next)
	w.set(okey, w.value)
	h := hashKey(okey)
	w.s.fresh.add(h)
	w.s.known.add(h)
	w.key = appendRevisionKey(w.key[:0], next.Revision)
	w.set(w.key, path)
	if next.Deleted {
		w.set(tombstoneKey(next.Modified, next.Key), nil)
	}
	w.rows[string(okey)] = next
}

// lease returns the stored value of the lease named, as this group left
// it.
func (w *writeTx) lease(name string) ([]byte, bool, error) {
	if v, ok := w.leases[name]; ok {
		return v, v != nil, nil
	}
	v, c, err := w.s.db.Get(leaseKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dbErr(fmt.Errorf("read lease %q: %w", name, err))
	}
	defer c.Close()
	return append([]byte(nil), v...), true, nil
}

// applyLease executes a lease operation; lease operations take no
// revision.
func (w *writeTx) applyLease(op store.Op) (store.Result, error) {
	l := op.Lease
	if l == nil {
		return store.Result{Err: fmt.Errorf("%s: no lease", op.Type)}, nil
	}
	if op.Type == store.OpDeleteLease {
		if err := backend.CheckLeaseName(l.Name); err != nil {
			return store.Result{Err: fmt.Errorf("%s %q: %w", op.Type, l.Name, err)}, nil
		}
		w.del(leaseKey(l.Name))
		w.leases[l.Name] = nil
		return store.Result{}, nil
	}
	expires, err := backend.CheckLease(l)
	if err != nil {
		return store.Result{Err: fmt.Errorf("%s %q: %w", op.Type, l.Name, err)}, nil
	}
	if op.Type == store.OpCreateLease {
		_, exists, err := w.lease(l.Name)
		if err != nil {
			return store.Result{}, err
		}
		if exists {
			return store.Result{Err: fmt.Errorf("%s %q: %w", op.Type, l.Name, store.ErrAlreadyExists)}, nil
		}
	}
	v := encodeLease(expires, l.Value)
	w.set(leaseKey(l.Name), v)
	w.leases[l.Name] = v
	return store.Result{}, nil
}

// appendRecord executes an OpAppendRecord: the record, its terms and its
// time index, with the next sequence number.
func (w *writeTx) appendRecord(op store.Op) (store.Result, error) {
	r := op.Record
	if r == nil {
		return store.Result{Err: fmt.Errorf("%s: no record", op.Type)}, nil
	}
	if err := backend.CheckRecord(r); err != nil {
		return store.Result{Err: fmt.Errorf("%s to %q: %w", op.Type, r.Stream, err)}, nil
	}
	at := w.now
	if !r.Time.IsZero() {
		at = r.Time.UnixNano()
	}
	seq := w.records + 1
	w.key = appendRecordKey(w.key[:0], r.Stream, seq)
	w.value = appendRecord(w.value[:0], at, r.Terms, r.Data)
	w.set(w.key, w.value)
	for _, t := range backend.Dedupe(r.Terms) {
		w.key = appendTermKey(w.key[:0], r.Stream, t, seq)
		w.set(w.key, nil)
	}
	// A record in time order needs no time key (frontierKey): nearly
	// every record is stamped by the store's clock, and the key was one
	// of the eight a zone wrote for each service it names.
	front, err := w.frontier(r.Stream)
	if err != nil {
		return store.Result{}, err
	}
	if at < front {
		w.key = appendTimeKey(w.key[:0], r.Stream, at, seq)
		w.set(w.key, nil)
	} else if at > front {
		if w.frontiers == nil {
			w.frontiers = map[string]int64{}
		}
		w.frontiers[r.Stream] = at
	}
	w.records = seq
	return store.Result{}, nil
}

// frontier returns the latest time of a record of stream, as this group
// left it (math.MinInt64 when it has none).
func (w *writeTx) frontier(stream string) (int64, error) {
	if at, ok := w.frontiers[stream]; ok {
		return at, nil
	}
	if at, ok := w.s.frontiers[stream]; ok {
		return at, nil
	}
	at, err := w.s.loadFrontier(stream)
	if err != nil {
		return 0, err
	}
	if w.s.frontiers == nil {
		w.s.frontiers = map[string]int64{}
	}
	w.s.frontiers[stream] = at
	return at, nil
}

// loadFrontier reads the frontier of stream; without one (a store written
// before it existed, which indexed every record by time, or a stream
// without records), the latest time in the stream's time index.
func (s *Store) loadFrontier(stream string) (int64, error) {
	v, c, err := s.db.Get(frontierKey(stream))
	if err == nil {
		defer c.Close()
		if len(v) != 8 {
			return 0, dbErr(fmt.Errorf("frontier of %q: %d bytes, want 8", stream, len(v)))
		}
		return unordered(binary.BigEndian.Uint64(v)), nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return 0, dbErr(fmt.Errorf("frontier of %q: %w", stream, err))
	}
	prefix := timePrefix(stream)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, dbErr(fmt.Errorf("frontier of %q: %w", stream, err))
	}
	defer it.Close()
	if !it.Last() {
		if err := it.Error(); err != nil {
			return 0, dbErr(fmt.Errorf("frontier of %q: %w", stream, err))
		}
		return math.MinInt64, nil
	}
	k := it.Key()
	if len(k) != len(prefix)+16 {
		return 0, dbErr(fmt.Errorf("frontier of %q: bad time key %q", stream, k))
	}
	return unordered(binary.BigEndian.Uint64(k[len(prefix):])), nil
}
