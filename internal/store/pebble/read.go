package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, k resource.Key) (*resource.Object, error) {
	var o *resource.Object
	err := s.read(func() error {
		v, c, err := s.db.Get(objectKey(k))
		if errors.Is(err, pebble.ErrNotFound) {
			return store.ErrNotFound
		}
		if err != nil {
			return dbErr(err)
		}
		defer c.Close()
		r, err := decodeRow(k, v)
		if err != nil {
			return err
		}
		if err := s.synced.wait(r.Revision); err != nil {
			return err
		}
		if r.Deleted {
			return store.ErrNotFound
		}
		o, err = r.Object()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", k, err)
	}
	return o, nil
}

// snapshot runs f on a snapshot of the database while it is open.
func (s *Store) snapshot(f func(*pebble.Snapshot) error) error {
	return s.read(func() error {
		snap := s.db.NewSnapshot()
		defer snap.Close()
		return f(snap)
	})
}

// scan calls each for every key from lower (inclusive) to upper
// (exclusive; nil for no bound), in order, or in reverse order when
// reverse, until each returns false or an error.
func scan(snap *pebble.Snapshot, lower, upper []byte, reverse bool, each func(k, v []byte) (bool, error)) error {
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return dbErr(err)
	}
	valid := it.First
	step := it.Next
	if reverse {
		valid, step = it.Last, it.Prev
	}
	for ok := valid(); ok; ok = step() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return dbErr(err)
		}
		more, err := each(it.Key(), v)
		if err != nil {
			_ = it.Close()
			return err
		}
		if !more {
			break
		}
	}
	if err := it.Close(); err != nil {
		return dbErr(err)
	}
	return nil
}

// List implements store.Store. The objects and the revision come from one
// snapshot.
func (s *Store) List(ctx context.Context, k resource.Kind) ([]*resource.Object, int64, error) {
	if k != "" {
		if _, ok := resource.Lookup(k); !ok {
			return nil, 0, fmt.Errorf("list: unknown kind %q", k)
		}
	}
	dec := backend.NewListDecoder(ctx)
	var revision int64
	var hashes []uint64 // of every object key, when k is every kind
	err := s.snapshot(func(snap *pebble.Snapshot) error {
		rev, err := getUintFrom(snap, metaRevision)
		if err != nil {
			return dbErr(err)
		}
		revision = int64(rev)
		prefix := kindPrefix(k)
		return scan(snap, prefix, prefixEnd(prefix), false, func(key, v []byte) (bool, error) {
			if k == "" {
				hashes = append(hashes, hashKey(key))
			}
			if len(v) > 0 && v[0]&rowDeleted != 0 {
				return true, nil // a tombstone
			}
			rk, err := parseObjectPath(key[1:])
			if err != nil {
				return false, err
			}
			r, err := decodeRow(rk, v)
			if err != nil {
				return false, err
			}
			return true, dec.Add(r)
		})
	})
	if err == nil {
		err = s.synced.wait(revision) // the writer applies groups before their sync
	}
	var objs []*resource.Object
	if err == nil {
		objs, err = dec.Objects()
	}
	if err == nil && k == "" {
		s.known.listed(hashes)
	}
	if err != nil {
		if k == "" {
			return nil, 0, fmt.Errorf("list: %w", err)
		}
		return nil, 0, fmt.Errorf("list %s: %w", k, err)
	}
	return objs, revision, nil
}

// Changes implements store.Store. A limit of 0 or less means no limit.
func (s *Store) Changes(ctx context.Context, after int64, limit int) ([]store.Event, error) {
	return s.ChangesKnown(ctx, after, limit, nil)
}

// ChangesKnown implements store.KnownFeed: a put known has is neither
// read from the database nor decoded from what Recent holds.
func (s *Store) ChangesKnown(ctx context.Context, after int64, limit int, known store.Known) ([]store.Event, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	if s.isClosed() {
		return nil, fmt.Errorf("changes after %d: %w", after, store.ErrClosed)
	}
	// One process writes (the data directory's lock), so what it wrote
	// last is the latest. The feed ends at the last revision synced: the
	// database shows the groups applied after it already.
	upto := s.synced.last.Load()
	if after >= upto {
		return nil, nil
	}
	if evs, ok := s.recent.Changes(after, limit, known); ok {
		return evs, nil
	}
	return s.changesFromDB(ctx, after, upto, limit, known)
}

// changesFromDB is Changes read from the revision keys up to upto; a put
// known (when not nil) has is not read.
func (s *Store) changesFromDB(ctx context.Context, after, upto int64, limit int, known store.Known) ([]store.Event, error) {
	var events []store.Event
	err := s.snapshot(func(snap *pebble.Snapshot) error {
		compacted, err := getUintFrom(snap, metaCompacted)
		if err != nil {
			return dbErr(err)
		}
		if after < int64(compacted) {
			return fmt.Errorf("%w: the oldest revision to resume from is %d", store.ErrCompacted, compacted)
		}
		lower := revisionKey(max(after, 0) + 1)
		return scan(snap, lower, revisionKey(upto+1), false, func(key, path []byte) (bool, error) {
			rk, err := parseObjectPath(path)
			if err != nil {
				return false, err
			}
			if known != nil {
				if rev, ok := parseRevisionKey(key); ok {
					if obj, ok := known(rk, rev); ok {
						events = append(events, store.Event{Type: store.EventPut, Revision: rev, Key: rk, Object: obj})
						return len(events) < limit, ctx.Err()
					}
				}
			}
			v, c, err := snap.Get(objectKey(rk))
			if err != nil {
				return false, dbErr(fmt.Errorf("change feed names %s: %w", rk, err))
			}
			r, err := decodeRow(rk, v)
			c.Close()
			if err != nil {
				return false, err
			}
			e := store.Event{Type: store.EventDelete, Revision: r.Revision, Key: rk}
			if !r.Deleted {
				if e.Object, err = r.Object(); err != nil {
					return false, err
				}
				e.Type, e.Encoding = store.EventPut, r.Encoding()
			}
			events = append(events, e)
			return len(events) < limit, ctx.Err()
		})
	})
	if err != nil {
		return nil, fmt.Errorf("changes after %d: %w", after, err)
	}
	return events, nil
}

// Leases implements store.Store: a range scan of the lease keys. A prefix
// that is not printable ASCII matches no lease name.
func (s *Store) Leases(ctx context.Context, prefix string) ([]store.Lease, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("leases %q: %w", prefix, store.ErrClosed)
	}
	if !backend.PrintableASCII(prefix) {
		return nil, nil
	}
	var leases []store.Lease
	err := s.snapshot(func(snap *pebble.Snapshot) error {
		lower := leaseKey(prefix)
		return scan(snap, lower, prefixEnd(lower), false, func(k, v []byte) (bool, error) {
			name := string(k[1:])
			expires, value, err := decodeLease(name, v)
			if err != nil {
				return false, err
			}
			l := store.Lease{Name: name, ExpiresAt: backend.DecodeExpiry(expires)}
			if len(value) > 0 {
				l.Value = append([]byte(nil), value...)
			}
			leases = append(leases, l)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("leases %q: %w", prefix, err)
	}
	return leases, nil
}

// Records implements store.Recorder. With terms, it walks the sequence
// numbers of the first term and keeps those that carry the others; without,
// the stream's records; either way in sequence order, within After and
// Before, until Limit records pass the time filters.
func (s *Store) Records(ctx context.Context, q store.RecordQuery) ([]store.Record, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("records: %w", store.ErrClosed)
	}
	limit, err := backend.CheckRecordQuery(q)
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	lowSeq, highSeq := uint64(max(q.After, 0))+1, uint64(math.MaxInt64)
	if q.Before > 0 {
		highSeq = uint64(q.Before)
	}
	if lowSeq >= highSeq {
		return nil, nil
	}
	terms := backend.Dedupe(q.Terms)
	var out []store.Record
	err = s.snapshot(func(snap *pebble.Snapshot) error {
		keep := func(seq int64) (bool, error) {
			for _, t := range terms[min(1, len(terms)):] {
				_, c, err := snap.Get(termKey(q.Stream, t, seq))
				if errors.Is(err, pebble.ErrNotFound) {
					return true, nil
				}
				if err != nil {
					return false, dbErr(err)
				}
				c.Close()
			}
			v, c, err := snap.Get(recordKey(q.Stream, seq))
			if err != nil {
				return false, dbErr(fmt.Errorf("record %d: %w", seq, err))
			}
			defer c.Close()
			return add(&out, q, seq, v)
		}
		prefix := recordPrefix(q.Stream)
		if len(terms) > 0 {
			prefix = termPrefix(q.Stream, terms[0])
		}
		lower := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), lowSeq)
		upper := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), highSeq)
		return scan(snap, lower, upper, q.Descending, func(k, v []byte) (bool, error) {
			seq := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
			if len(terms) == 0 {
				if _, err := add(&out, q, seq, v); err != nil {
					return false, err
				}
			} else if _, err := keep(seq); err != nil {
				return false, err
			}
			return len(out) < limit, ctx.Err()
		})
	})
	if err != nil {
		return nil, fmt.Errorf("records of %q: %w", q.Stream, err)
	}
	return out, nil
}

// add appends the record seq with value v to out when its time passes q's
// filters.
func add(out *[]store.Record, q store.RecordQuery, seq int64, v []byte) (bool, error) {
	at, terms, data, err := decodeRecord(v)
	if err != nil {
		return false, fmt.Errorf("record %d: %w", seq, err)
	}
	if !q.Since.IsZero() && at.Before(q.Since) || !q.Until.IsZero() && !at.Before(q.Until) {
		return true, nil
	}
	*out = append(*out, store.Record{Stream: q.Stream, Seq: seq, Time: at, Terms: terms, Data: data})
	return true, nil
}

// Compact implements store.Compacter: it deletes the tombstones whose
// deletion is older than retention (by the store's clock) and raises the
// compaction horizon to the highest revision it deleted.
func (s *Store) Compact(ctx context.Context, retention time.Duration) (int, error) {
	before := s.now().Add(-retention).UnixNano()
	n, err := s.compactWith(func(w *pebble.Batch, snap *pebble.Snapshot) (int, error) {
		n, horizon := 0, s.compacted
		upper := append([]byte{tTombstone}, u64(ordered(before))...)
		err := scan(snap, []byte{tTombstone}, upper, false, func(k, _ []byte) (bool, error) {
			rk, err := parseObjectPath(k[9:])
			if err != nil {
				return false, err
			}
			v, c, err := snap.Get(objectKey(rk))
			if err != nil {
				return false, dbErr(fmt.Errorf("tombstone index names %s: %w", rk, err))
			}
			r, err := decodeRow(rk, v)
			c.Close()
			if err != nil {
				return false, err
			}
			_ = w.Delete(k, nil)
			_ = w.Delete(objectKey(rk), nil)
			_ = w.Delete(revisionKey(r.Revision), nil)
			horizon = max(horizon, r.Revision)
			n++
			return true, ctx.Err()
		})
		if err != nil || n == 0 {
			return 0, err
		}
		_ = w.Set(metaCompacted, u64(uint64(horizon)), nil)
		// Readers resuming below the new horizon must get ErrCompacted,
		// which only the database tells.
		s.recent.Clear()
		s.compacted = horizon
		return n, nil
	})
	if err != nil {
		return 0, fmt.Errorf("compact: %w", err)
	}
	return n, nil
}

// compactWith runs f beside the writer with a snapshot and a batch, and
// commits the batch when f returns a count above 0.
func (s *Store) compactWith(f func(*pebble.Batch, *pebble.Snapshot) (int, error)) (int, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// Not on a store refusing writes: pebble must not take a record in a
	// log that failed (disk.go).
	if err := s.synced.failure(); err != nil {
		return 0, err
	}
	if err := s.disk.refuse(); err != nil {
		return 0, err
	}
	var n int
	err := s.snapshot(func(snap *pebble.Snapshot) error {
		b := s.db.NewBatch()
		defer b.Close()
		var err error
		if n, err = f(b, snap); err != nil || n == 0 {
			return err
		}
		if err := b.Commit(pebble.Sync); err != nil {
			err = dbErr(err)
			s.synced.fail(err)
			s.disk.wake()
			return err
		}
		return nil
	})
	return n, err
}

// CompactRecords implements store.Recorder: it deletes the records of
// stream older than before, with their terms, in one batch.
func (s *Store) CompactRecords(ctx context.Context, stream string, before time.Time) (int, error) {
	if s.isClosed() {
		return 0, fmt.Errorf("compact records: %w", store.ErrClosed)
	}
	if err := backend.CheckStream(stream); err != nil {
		return 0, fmt.Errorf("compact records: %w", err)
	}
	n, err := s.compactWith(func(w *pebble.Batch, snap *pebble.Snapshot) (int, error) {
		deleted := map[int64]bool{}
		del := func(seq int64, terms []string) {
			for _, t := range backend.Dedupe(terms) {
				_ = w.Delete(termKey(stream, t, seq), nil)
			}
			_ = w.Delete(recordKey(stream, seq), nil)
			deleted[seq] = true
		}
		cutoff := before.UnixNano()
		// The records in the time index (late ones, and every record of a
		// store written before frontiers), wherever they are.
		prefix := timePrefix(stream)
		upper := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), ordered(cutoff))
		err := scan(snap, prefix, upper, false, func(k, _ []byte) (bool, error) {
			seq := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
			v, c, err := snap.Get(recordKey(stream, seq))
			if err != nil {
				return false, dbErr(fmt.Errorf("time index names record %d: %w", seq, err))
			}
			_, terms, _, err := decodeRecord(v)
			c.Close()
			if err != nil {
				return false, fmt.Errorf("record %d: %w", seq, err)
			}
			del(seq, terms)
			_ = w.Delete(k, nil)
			return true, ctx.Err()
		})
		if err != nil {
			return 0, err
		}
		// The others are in time order by sequence number: from the
		// start of the stream up to the first record at or after before.
		// Any record after it that is older was late, so indexed above.
		rp := recordPrefix(stream)
		err = scan(snap, rp, prefixEnd(rp), false, func(k, v []byte) (bool, error) {
			seq := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
			at, terms, _, err := decodeRecord(v)
			if err != nil {
				return false, fmt.Errorf("record %d: %w", seq, err)
			}
			if at.UnixNano() >= cutoff {
				return false, nil
			}
			if !deleted[seq] {
				del(seq, terms)
			}
			return true, ctx.Err()
		})
		return len(deleted), err
	})
	if err != nil {
		return 0, fmt.Errorf("compact records of %q: %w", stream, err)
	}
	return n, nil
}
