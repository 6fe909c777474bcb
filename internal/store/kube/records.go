package kube

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// MaxRecords bounds the records kept of each stream; the oldest go first.
const MaxRecords = 100_000

// Records of a stream are kept in blocks: the newest plain, to which
// records are appended until it holds blockRecords records or blockBytes
// bytes; the record that fills it compresses it whole (seal).
const (
	blockRecords = 1024
	blockBytes   = 128 << 10
	// maxRecordPlain bounds a record as a block lays it out: three
	// varints, the number of terms, the terms with their NULs, the data.
	maxRecordPlain = 3*binary.MaxVarintLen64 + 1 + store.MaxRecordTerms*(store.MaxRecordTermBytes+1) + store.MaxRecordBytes
	// maxBlockPlain bounds a block: under blockBytes before its last
	// record.
	maxBlockPlain = blockBytes + maxRecordPlain
)

// records keeps the record streams (the audit log, the history of
// hostnames and VIPs) in this process's memory. Kubernetes has no place for
// an append-only log of this size that meshnames may write: the records
// of an instance are lost when it stops, and each instance has only its
// own. docs/kubernetes.md says so. Every named Service has records (its
// hostnames and VIP assigned): they are compressed in blocks of up to
// blockRecords (recordBlock), where the records of one Service and the
// next share nearly everything, rather than one by one with a slice
// element of their own each (about 170 bytes per Service).
type records struct {
	mu      sync.Mutex
	seq     int64
	streams map[string]*recordStream
}

// recordStream is the records of one stream, oldest first.
type recordStream struct {
	blocks []recordBlock // the last one open, unless it is sealed
	n      int           // records kept, over every block
}

// recordBlock is a run of records: each as the uvarint of its seq less
// the one before's (0 before the first), the varint of its time
// (UnixNano: CheckRecord keeps times in its range) less the one before's,
// the uvarint of the length of the rest, and the rest: the number of its
// terms (at most MaxRecordTerms) in a byte, each term followed by a NUL
// (terms hold no control characters), then its data. A sealed block's
// body is that compressed. Differences rather than numbers leave the
// compressor the same few bytes between the records of one Service and
// the next.
type recordBlock struct {
	n    int // records in body
	skip int // the first skip records were dropped (MaxRecords)
	// sealed: the block is full and body is compressed; records go to
	// the next block.
	sealed bool
	body   []byte
	// lastSeq and lastTime are those of the last record in body.
	lastSeq, lastTime int64
}

// rawRecord is a record of a block as its reader sees it: plain is the
// number of terms, the terms and the data, valid while the block is read.
type rawRecord struct {
	seq, time int64
	plain     []byte
}

var _ store.Recorder = (*Store)(nil)

// begin appends the head of a record of size bytes, numbered seq, at
// time at (UnixNano), to an open block; its terms and data follow.
func (b *recordBlock) begin(seq, at int64, size int) {
	b.body = binary.AppendUvarint(b.body, uint64(seq-b.lastSeq))
	b.body = binary.AppendVarint(b.body, at-b.lastTime)
	b.body = binary.AppendUvarint(b.body, uint64(size))
	b.lastSeq, b.lastTime = seq, at
	b.n++
}

// add appends rec, numbered seq, to an open block.
func (b *recordBlock) add(seq int64, rec store.Record) {
	n := 1 + len(rec.Data)
	for _, t := range rec.Terms {
		n += len(t) + 1
	}
	b.begin(seq, rec.Time.UnixNano(), n)
	b.body = append(b.body, byte(len(rec.Terms)))
	for _, t := range rec.Terms {
		b.body = append(append(b.body, t...), 0)
	}
	b.body = append(b.body, rec.Data...)
}

var errDamaged = errors.New("a damaged record")

// reader holds the buffers of reading blocks, reused from one to the next.
type reader struct {
	recs  []rawRecord
	plain []byte
}

// read calls use with the records of b still kept, in order; use must
// not keep them beyond the call.
func (rd *reader) read(b *recordBlock, use func([]rawRecord) error) error {
	plain := b.body
	if b.sealed {
		n, err := s2.DecodedLen(b.body)
		if err != nil {
			return err
		}
		if n > maxBlockPlain {
			return fmt.Errorf("a block of %d bytes, more than %d", n, maxBlockPlain)
		}
		if cap(rd.plain) < n {
			rd.plain = make([]byte, n)
		}
		if plain, err = s2.Decode(rd.plain[:n], b.body); err != nil {
			return err
		}
	}
	out := rd.recs[:0]
	var seq, at int64
	for len(plain) > 0 {
		dseq, n1 := binary.Uvarint(plain)
		if n1 <= 0 {
			return errDamaged
		}
		dt, n2 := binary.Varint(plain[n1:])
		if n2 <= 0 {
			return errDamaged
		}
		seq, at = seq+int64(dseq), at+dt
		size, n3 := binary.Uvarint(plain[n1+n2:])
		start := n1 + n2 + n3
		if n3 <= 0 || size < 1 || size > uint64(len(plain)-start) {
			return errDamaged
		}
		out = append(out, rawRecord{seq: seq, time: at, plain: plain[start : start+int(size)]})
		plain = plain[start+int(size):]
	}
	rd.recs = out
	if len(out) != b.n {
		return errDamaged
	}
	return use(out[b.skip:])
}

// split returns a record's terms, each followed by a NUL, and its data.
func (r rawRecord) split() (terms, data []byte, err error) {
	if int(r.plain[0]) > store.MaxRecordTerms {
		return nil, nil, errDamaged
	}
	end := 1
	for range r.plain[0] {
		i := bytes.IndexByte(r.plain[end:], 0)
		if i < 0 {
			return nil, nil, errDamaged
		}
		end += i + 1
	}
	return r.plain[1:end], r.plain[end:], nil
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
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streams == nil {
		r.streams = map[string]*recordStream{}
	}
	s := r.streams[rec.Stream]
	if s == nil {
		s = &recordStream{}
		r.streams[rec.Stream] = s
	}
	r.seq++
	if len(s.blocks) == 0 || s.blocks[len(s.blocks)-1].sealed {
		s.blocks = append(s.blocks, recordBlock{})
	}
	open := &s.blocks[len(s.blocks)-1]
	open.add(r.seq, rec)
	s.n++
	if open.n >= blockRecords || len(open.body) >= blockBytes {
		open.seal() // full: the next record starts a block
	}
	for s.n > MaxRecords {
		first := &s.blocks[0]
		first.skip++
		s.n--
		if first.skip == first.n {
			s.blocks[0] = recordBlock{}
			s.blocks = s.blocks[1:]
		}
	}
	return nil
}

// seal compresses a full block into an allocation of its size, with S2's
// fastest compression (a pooled table of 64 KiB): its best compression
// kept a named Service's history record in 40 bytes against 56
// (TestRecords_KeptSmall) for 17 times the CPU and 4.5 MiB of pooled tables,
// allocated again whenever a collection had emptied the pool, which in a
// first naming (collected every few megabytes) was nearly every block.
func (b *recordBlock) seal() {
	enc := s2.Encode(nil, b.body)
	b.body, b.sealed = append(make([]byte, 0, len(enc)), enc...), true
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
	st := r.streams[q.Stream]
	if st == nil {
		return nil, nil
	}
	var out []store.Record
	// match appends p to out if q selects it.
	match := func(p rawRecord) error {
		at := time.Unix(0, p.time).UTC()
		if q.After > 0 && p.seq <= q.After || q.Before > 0 && p.seq >= q.Before ||
			!q.Since.IsZero() && at.Before(q.Since) || !q.Until.IsZero() && !at.Before(q.Until) {
			return nil
		}
		terms, data, err := p.split()
		if err != nil {
			return fmt.Errorf("records: seq %d: %w", p.seq, err)
		}
		for _, t := range q.Terms {
			if !hasTerm(terms, t) {
				return nil
			}
		}
		rec := store.Record{Stream: q.Stream, Seq: p.seq, Time: at, Terms: splitTerms(terms)}
		if len(data) > 0 {
			rec.Data = bytes.Clone(data)
		}
		out = append(out, rec)
		return nil
	}
	errFull := errors.New("full")
	var rd reader
	for i := range st.blocks {
		b := &st.blocks[i]
		if q.Descending {
			b = &st.blocks[len(st.blocks)-1-i]
		}
		err := rd.read(b, func(rs []rawRecord) error {
			for j := range rs {
				p := rs[j]
				if q.Descending {
					p = rs[len(rs)-1-j]
				}
				if err := match(p); err != nil {
					return err
				}
				if len(out) == limit {
					return errFull
				}
			}
			return nil
		})
		if errors.Is(err, errFull) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("records: %w", err)
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
	st := r.streams[stream]
	if st == nil {
		return 0, nil
	}
	// The blocks are rewritten into a new list, which replaces the old
	// one only once every block was read: a damaged block changes nothing.
	removed := 0
	kept := make([]recordBlock, 0, len(st.blocks))
	var rd reader
	for _, b := range st.blocks {
		var nb recordBlock
		err := rd.read(&b, func(rs []rawRecord) error {
			for _, p := range rs {
				if !time.Unix(0, p.time).Before(before) {
					nb.begin(p.seq, p.time, len(p.plain))
					nb.body = append(nb.body, p.plain...)
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("compact records: %w", err)
		}
		switch {
		case nb.n == b.n-b.skip: // nothing removed: the block stays as it is
		case nb.n == 0:
			removed += b.n - b.skip
			continue
		default:
			removed += b.n - b.skip - nb.n
			if b.sealed {
				nb.seal()
			}
			b = nb
		}
		kept = append(kept, b)
	}
	st.blocks, st.n = kept, st.n-removed
	return removed, nil
}
