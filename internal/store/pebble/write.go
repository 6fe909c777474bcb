package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// maxGroupOps bounds the operations the writer puts in one batch. A single
// request larger than this still gets a batch of its own.
const maxGroupOps = 1000

// Request states: the writer claims a pending request before it writes
// it; Apply abandons it when the caller's context ends first.
const (
	pending int32 = iota
	claimed
	abandoned
)

// request is one Apply call waiting for the writer.
type request struct {
	ops []store.Op
	// prep are the resource operations checked and encoded by the caller.
	prep  []prepared
	fence *store.Fence
	state atomic.Int32
	done  chan outcome
}

type outcome struct {
	results []store.Result
	err     error
}

// prepared is a resource operation checked and encoded.
type prepared struct {
	key resource.Key
	enc backend.Encoded
	err error // the operation fails with it
	// encodeErr is an encoding failure, reported with the operation.
	encodeErr error
}

func prepare(ops []store.Op) []prepared {
	out := make([]prepared, len(ops))
	for i, op := range ops {
		switch op.Type {
		case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease, store.OpAppendRecord:
			continue
		}
		p := &out[i]
		var d *resource.Descriptor
		if p.key, d, p.err = backend.Check(op); p.err != nil || op.Type == store.OpDelete {
			continue
		}
		p.enc, p.encodeErr = backend.Encode(op.Object, op.Type, d)
	}
	return out
}

// Apply implements store.Store. If ctx ends before the writer has taken
// the batch up, nothing is written and Apply returns ctx's error; if it
// ends later, Apply returns at once with an error saying that the batch
// may still commit.
func (s *Store) Apply(ctx context.Context, ops ...store.Op) ([]store.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	r := &request{ops: ops, prep: prepare(ops), done: make(chan outcome, 1)}
	if f, ok := store.FenceFrom(ctx); ok {
		if err := backend.CheckLeaseName(f.Lease); err != nil {
			return nil, fmt.Errorf("apply: fence %q: %w", f.Lease, err)
		}
		r.fence = &f
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("apply: %w", store.ErrClosed)
	}
	if len(ops) == 0 {
		s.mu.Unlock()
		return []store.Result{}, nil
	}
	s.queue = append(s.queue, r)
	s.cond.Signal()
	s.mu.Unlock()

	select {
	case o := <-r.done:
		return o.results, o.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(pending, abandoned) {
			return nil, fmt.Errorf("apply: %w", ctx.Err())
		}
		return nil, fmt.Errorf("apply: %w (the batch was already being written and may still commit)", ctx.Err())
	}
}

func (s *Store) writeLoop() {
	defer close(s.writerDone)
	for {
		group := s.take()
		if group == nil {
			return
		}
		s.commit(group)
	}
}

// take waits for queued requests and claims up to maxGroupOps operations
// worth of them, in queue order; nil when the store is closed and nothing
// is left to write.
func (s *Store) take() []*request {
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return nil
		}
		n, ops := 0, 0
		for n < len(s.queue) && (n == 0 || ops+len(s.queue[n].ops) <= maxGroupOps) {
			ops += len(s.queue[n].ops)
			n++
		}
		taken := s.queue[:n]
		s.queue = append([]*request(nil), s.queue[n:]...)
		s.mu.Unlock()

		group := taken[:0]
		for _, r := range taken {
			if r.state.CompareAndSwap(pending, claimed) {
				group = append(group, r)
			}
		}
		if len(group) > 0 {
			return group
		}
	}
}

// commit writes group in one synced batch and hands every request its
// outcome. A failure to read or commit fails every request of the group
// (the database is the problem) and leaves the store as it was.
func (s *Store) commit(group []*request) {
	s.writeMu.Lock()
	outcomes, notify, err := s.writeGroup(group)
	s.writeMu.Unlock()
	if err == nil && notify {
		s.notifier.Notify()
	}
	for i, r := range group {
		if err != nil {
			r.done <- outcome{err: fmt.Errorf("apply: %w", err)}
			continue
		}
		r.done <- outcomes[i]
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
	events []backend.RecentEvent
}

func (s *Store) writeGroup(group []*request) ([]outcome, bool, error) {
	w := &writeTx{s: s, b: s.db.NewBatch(), now: s.now().UnixNano(), clock: time.Now().UnixNano(),
		revision: s.revision, records: s.records, rows: map[string]*row{}, leases: map[string][]byte{}}
	defer w.b.Close()
	outcomes := make([]outcome, len(group))
	for i, r := range group {
		if r.fence != nil {
			current, err := w.fenced(r.fence)
			if err != nil {
				return nil, false, err
			}
			if !current {
				outcomes[i].err = fmt.Errorf("apply: lease %q, holder %q, term %d: %w", r.fence.Lease, r.fence.Holder, r.fence.Term, store.ErrFenced)
				continue
			}
		}
		results := make([]store.Result, len(r.ops))
		for j, op := range r.ops {
			if err := backend.Dependencies(op, j, results); err != nil {
				results[j] = store.Result{Err: err}
				continue
			}
			var err error
			if results[j], err = w.apply(op, &r.prep[j]); err != nil {
				return nil, false, err
			}
		}
		outcomes[i].results = results
	}
	if w.records > s.records {
		_ = w.b.Set(metaRecords, u64(uint64(w.records)), nil)
	}
	if w.revision > s.revision {
		_ = w.b.Set(metaRevision, u64(uint64(w.revision)), nil)
	}
	if w.b.Empty() {
		return outcomes, false, nil
	}
	if err := w.b.Commit(pebble.Sync); err != nil {
		return nil, false, dbErr(fmt.Errorf("commit: %w", err))
	}
	notify := w.revision > s.revision
	s.revision, s.records = w.revision, w.records
	s.recent.Add(w.events)
	return outcomes, notify, nil
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
func (w *writeTx) apply(op store.Op, p *prepared) (store.Result, error) {
	switch op.Type {
	case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease:
		return w.applyLease(op)
	case store.OpAppendRecord:
		return w.appendRecord(op)
	}
	key, err := p.key, p.err
	if err != nil {
		return store.Result{Err: err}, nil
	}
	fail := func(err error, detail string) (store.Result, error) {
		return store.Result{Err: fmt.Errorf("%s %s: %w%s", op.Type, key, err, detail)}, nil
	}
	if p.encodeErr != nil {
		return fail(p.encodeErr, "")
	}
	okey := objectKey(key)
	cur, err := w.load(key, okey)
	if err != nil {
		return store.Result{}, err
	}
	next := row{key: key, labels: p.enc.Labels, spec: p.enc.Spec, status: p.enc.Status}
	live := cur != nil && !cur.deleted
	switch op.Type {
	case store.OpCreate:
		if live {
			return fail(store.ErrAlreadyExists, "")
		}
		next.version, next.created = 1, w.now
	case store.OpUpdate, store.OpUpdateStatus, store.OpDelete, store.OpPatchStatus:
		want := op.Version
		if op.Type != store.OpDelete {
			want = op.Object.Version
		}
		switch {
		case !live:
			return fail(store.ErrNotFound, "")
		case op.Type == store.OpPatchStatus:
			// Not versioned: the writer replaces only what it owns.
		case op.Type != store.OpDelete || want != 0:
			if want != cur.version {
				return fail(store.ErrConflict, fmt.Sprintf(" (version %d, stored %d)", want, cur.version))
			}
		}
		next.version, next.created = cur.version+1, cur.created
		switch op.Type {
		case store.OpUpdate:
			next.status = cur.status
		case store.OpUpdateStatus:
			next.labels, next.spec = cur.labels, cur.spec
		case store.OpPatchStatus:
			next.labels, next.spec = cur.labels, cur.spec
			if next.status, err = backend.PatchStatus(cur.status, next.status, op.Patch); err != nil {
				return fail(err, "")
			}
		case store.OpDelete:
			next.deleted = true // a tombstone keeps no labels, spec or status
			next.labels, next.spec, next.status = "", "", ""
		}
	}
	if next.size() > store.MaxObjectBytes {
		return fail(store.ErrTooLarge, fmt.Sprintf(" (%d bytes, limit %d)", next.size(), store.MaxObjectBytes))
	}
	next.modified = w.now
	next.revision = w.revision + 1
	w.put(okey, &next, cur)
	w.revision = next.revision
	if next.deleted {
		w.events = append(w.events, backend.RecentEvent{Rev: next.revision, Key: key})
		return store.Result{Revision: next.revision}, nil
	}
	obj, err := w.stored(op, &next, cur)
	if err != nil {
		return store.Result{}, err
	}
	w.events = append(w.events, backend.RecentEvent{Rev: next.revision, Key: key, Obj: obj})
	if op.DiscardObject {
		return store.Result{Revision: next.revision}, nil
	}
	return store.Result{Object: obj.Clone(), Revision: next.revision}, nil
}

// load returns the row of key (okey is its object key), live or
// tombstone, or nil: as this group left it, else as stored.
func (w *writeTx) load(key resource.Key, okey []byte) (*row, error) {
	if r, ok := w.rows[string(okey)]; ok {
		return r, nil
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

// put writes next over cur (nil when the key has no row): the object, its
// revision key in place of cur's, and the tombstone index.
func (w *writeTx) put(okey []byte, next, cur *row) {
	path := okey[1:]
	if cur != nil {
		_ = w.b.Delete(revisionKey(cur.revision), nil)
		if cur.deleted {
			_ = w.b.Delete(tombstoneKey(cur.modified, cur.key), nil)
		}
	}
	_ = w.b.Set(okey, encodeRow(next), nil)
	_ = w.b.Set(revisionKey(next.revision), path, nil)
	if next.deleted {
		_ = w.b.Set(tombstoneKey(next.modified, next.key), nil, nil)
	}
	w.rows[string(okey)] = next
}

// stored returns the resource op wrote as next over cur, for readers
// (Store.recent; callers get a clone). A create or an update wrote
// op.Object's labels and spec as they are, and a status write kept those
// of the previous write of the resource, which recent usually still holds:
// only a status is decoded then.
func (w *writeTx) stored(op store.Op, next, cur *row) (*resource.Object, error) {
	var obj *resource.Object
	switch op.Type {
	case store.OpCreate, store.OpUpdate:
		obj = op.Object.Clone()
		if len(obj.Labels) == 0 {
			obj.Labels = nil
		}
		if op.Type == store.OpCreate {
			return w.stamp(obj, next), nil
		}
	default:
		prev := w.s.recent.ObjectBefore(next.key)
		if prev == nil || cur == nil || prev.Revision != cur.revision {
			// Not in recent, or written earlier in this group (recent
			// learns of the group's writes only after it commits).
			return next.object()
		}
		c := *prev // labels and spec are read-only and shared
		obj = &c
	}
	var err error
	if obj.Status, err = resource.UnmarshalStatus(next.key.Kind, []byte(next.status)); err != nil {
		return nil, fmt.Errorf("decode %s: %w", next.key, err)
	}
	return w.stamp(obj, next), nil
}

func (w *writeTx) stamp(obj *resource.Object, next *row) *resource.Object {
	obj.Version, obj.Revision = next.version, next.revision
	obj.CreationTime, obj.ModificationTime = time.Unix(0, next.created).UTC(), time.Unix(0, next.modified).UTC()
	return obj
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
		_ = w.b.Delete(leaseKey(l.Name), nil)
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
	_ = w.b.Set(leaseKey(l.Name), v, nil)
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
	_ = w.b.Set(recordKey(r.Stream, seq), encodeRecord(at, r.Terms, r.Data), nil)
	for _, t := range backend.Dedupe(r.Terms) {
		_ = w.b.Set(termKey(r.Stream, t, seq), nil, nil)
	}
	_ = w.b.Set(timeKey(r.Stream, at, seq), nil, nil)
	w.records = seq
	return store.Result{}, nil
}
