package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// MaxRecords bounds the records kept of each stream; the oldest go first.
const MaxRecords = 100_000

// records keeps the record streams (the audit log, the history of
// hostnames and VIPs) in this process's memory. Kubernetes has no place for
// an append-only log of this size that meshnames may write: the records
// of an instance are lost when it stops, and each instance has only its
// own. docs/kubernetes.md says so. Every named Service has records (its
// hostnames and VIP assigned), so each is kept in one allocation, its
// terms and data compressed (packRecord).
type records struct {
	mu      sync.Mutex
	seq     int64
	streams map[string][]packedRecord
}

// packedRecord is a record as records keeps it.
type packedRecord struct {
	seq  int64
	time int64  // UnixNano: CheckRecord keeps times in its range
	body []byte // the terms and the data, compressed (packRecord)
}

var _ store.Recorder = (*Store)(nil)

// packRecord returns the terms and the data of rec compressed: the number
// of terms (at most MaxRecordTerms) in a byte, each term followed by a NUL
// (terms hold no control characters), then the data.
func packRecord(rec store.Record) []byte {
	n := 1 + len(rec.Data)
	for _, t := range rec.Terms {
		n += len(t) + 1
	}
	plain := make([]byte, 0, n)
	plain = append(plain, byte(len(rec.Terms)))
	for _, t := range rec.Terms {
		plain = append(append(plain, t...), 0)
	}
	return recordDict().Encode(nil, append(plain, rec.Data...))
}

// unpack calls use with p's terms, each followed by a NUL, and its
// data; use must not keep them, which are only valid during the call.
func (p packedRecord) unpack(use func(terms, data []byte) error) error {
	return recordDict().Decode(p.body, func(plain []byte) error {
		if len(plain) == 0 || int(plain[0]) > store.MaxRecordTerms {
			return errors.New("a damaged record")
		}
		end := 1
		for range plain[0] {
			i := bytes.IndexByte(plain[end:], 0)
			if i < 0 {
				return errors.New("a damaged record")
			}
			end += i + 1
		}
		return use(plain[1:end], plain[end:])
	})
}

// hasTerm reports whether terms, each followed by a NUL, hold t.
func hasTerm(terms []byte, t string) bool {
	for len(terms) > 0 {
		i := bytes.IndexByte(terms, 0)
		if string(terms[:i]) == t {
			return true
		}
		terms = terms[i+1:]
	}
	return false
}

// splitTerms returns terms, each followed by a NUL, as strings (nil for
// none).
func splitTerms(terms []byte) []string {
	var out []string
	for len(terms) > 0 {
		i := bytes.IndexByte(terms, 0)
		out, terms = append(out, string(terms[:i])), terms[i+1:]
	}
	return out
}

func (r *records) append(rec store.Record, now time.Time) error {
	if err := backend.CheckRecord(&rec); err != nil {
		return err
	}
	if rec.Time.IsZero() {
		rec.Time = now
	}
	body := packRecord(rec)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streams == nil {
		r.streams = map[string][]packedRecord{}
	}
	r.seq++
	s := append(r.streams[rec.Stream], packedRecord{seq: r.seq, time: rec.Time.UnixNano(), body: body})
	if len(s) > MaxRecords {
		s = slices.Delete(s, 0, len(s)-MaxRecords)
	}
	r.streams[rec.Stream] = s
	return nil
}

// Records implements store.Recorder.
func (s *Store) Records(ctx context.Context, q store.RecordQuery) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := backend.CheckStream(q.Stream); err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	for i, t := range q.Terms {
		if err := backend.CheckRecord(&store.Record{Stream: q.Stream, Terms: []string{t}}); err != nil {
			return nil, fmt.Errorf("records: terms[%d]: %w", i, err)
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = store.DefaultRecordLimit
	}
	limit = min(limit, store.MaxRecordLimit)
	r := &s.records
	r.mu.Lock()
	defer r.mu.Unlock()
	all := r.streams[q.Stream]
	var out []store.Record
	for i := range all {
		j := i
		if q.Descending {
			j = len(all) - 1 - i
		}
		p := all[j]
		at := time.Unix(0, p.time).UTC()
		if q.After > 0 && p.seq <= q.After || q.Before > 0 && p.seq >= q.Before ||
			!q.Since.IsZero() && at.Before(q.Since) || !q.Until.IsZero() && !at.Before(q.Until) {
			continue
		}
		err := p.unpack(func(terms, data []byte) error {
			for _, t := range q.Terms {
				if !hasTerm(terms, t) {
					return nil
				}
			}
			rec := store.Record{Stream: q.Stream, Seq: p.seq, Time: at, Terms: splitTerms(terms)}
			if len(data) > 0 {
				rec.Data = slices.Clone(data)
			}
			out = append(out, rec)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("records: seq %d: %w", p.seq, err)
		}
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// CompactRecords implements store.Recorder.
func (s *Store) CompactRecords(ctx context.Context, stream string, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := backend.CheckStream(stream); err != nil {
		return 0, fmt.Errorf("compact records: %w", err)
	}
	r := &s.records
	r.mu.Lock()
	defer r.mu.Unlock()
	all := r.streams[stream]
	n := 0
	kept := all[:0]
	for _, rec := range all {
		if time.Unix(0, rec.time).Before(before) {
			n++
			continue
		}
		kept = append(kept, rec)
	}
	clear(all[len(kept):])
	r.streams[stream] = kept
	return n, nil
}
