package kube

import (
	"context"
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
// own. docs/kubernetes.md says so.
type records struct {
	mu      sync.Mutex
	seq     int64
	streams map[string][]store.Record
}

var _ store.Recorder = (*Store)(nil)

func (r *records) append(rec store.Record, now time.Time) error {
	if err := backend.CheckRecord(&rec); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streams == nil {
		r.streams = map[string][]store.Record{}
	}
	r.seq++
	rec.Seq = r.seq
	if rec.Time.IsZero() {
		rec.Time = now
	}
	rec.Time = rec.Time.UTC()
	rec.Terms = slices.Clone(rec.Terms)
	rec.Data = slices.Clone(rec.Data)
	if len(rec.Data) == 0 {
		rec.Data = nil
	}
	s := append(r.streams[rec.Stream], rec)
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
	keep := func(rec store.Record) bool {
		switch {
		case q.After > 0 && rec.Seq <= q.After, q.Before > 0 && rec.Seq >= q.Before,
			!q.Since.IsZero() && rec.Time.Before(q.Since), !q.Until.IsZero() && !rec.Time.Before(q.Until):
			return false
		}
		for _, t := range q.Terms {
			if !slices.Contains(rec.Terms, t) {
				return false
			}
		}
		return true
	}
	for i := range all {
		j := i
		if q.Descending {
			j = len(all) - 1 - i
		}
		if rec := all[j]; keep(rec) {
			rec.Terms, rec.Data = slices.Clone(rec.Terms), slices.Clone(rec.Data)
			out = append(out, rec)
			if len(out) == limit {
				break
			}
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
		if rec.Time.Before(before) {
			n++
			continue
		}
		kept = append(kept, rec)
	}
	clear(all[len(kept):])
	r.streams[stream] = kept
	return n, nil
}
