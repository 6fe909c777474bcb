package kube

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/s2"

	"github.com/meshnames/meshnames/internal/store"
)

// recordsOf appends n records to a new store's stream "audit": the i-th
// (seq i+1) at base plus i seconds, with the term "n=<i mod 7>" and data
// of its number.
func recordsOf(t *testing.T, n int) (*Store, []store.Record, time.Time) {
	t.Helper()
	s := &Store{}
	base := time.Unix(1_800_000_000, 0).UTC()
	var all []store.Record
	for i := range n {
		rec := store.Record{Stream: "audit", Time: base.Add(time.Duration(i) * time.Second),
			Terms: []string{fmt.Sprintf("n=%d", i%7)}, Data: fmt.Appendf(nil, `{"i":%d}`, i)}
		if err := s.records.append(rec, base); err != nil {
			t.Fatal(err)
		}
		rec.Seq = int64(i + 1)
		all = append(all, rec)
	}
	return s, all, base
}

// Queries read across sealed blocks and the open one as over one list:
// every filter, both orders, limits that end inside a block.
func TestRecords_QueriesAcrossBlocks(t *testing.T) {
	const n = 3*blockRecords + 17
	s, all, base := recordsOf(t, n)
	if b := s.records.streams["audit"].blocks; len(b) != 4 || !b[2].sealed || b[3].sealed {
		t.Fatalf("%d blocks; want 3 sealed and 1 open", len(b))
	}
	for _, q := range []store.RecordQuery{
		{Limit: store.MaxRecordLimit},
		{Limit: store.MaxRecordLimit, Descending: true},
		{Limit: blockRecords + 3},
		{Limit: blockRecords + 3, Descending: true},
		{Terms: []string{"n=3"}, Limit: 50, Descending: true},
		{After: blockRecords - 2, Before: 2*blockRecords + 5, Limit: store.MaxRecordLimit},
		{Since: base.Add(300 * time.Second), Until: base.Add(600 * time.Second), Limit: store.MaxRecordLimit, Descending: true},
	} {
		q.Stream = "audit"
		var want []store.Record
		for i := range all {
			r := all[i]
			if q.Descending {
				r = all[len(all)-1-i]
			}
			if len(q.Terms) > 0 && !slices.Contains(r.Terms, q.Terms[0]) || q.After > 0 && r.Seq <= q.After ||
				q.Before > 0 && r.Seq >= q.Before || !q.Since.IsZero() && r.Time.Before(q.Since) || !q.Until.IsZero() && !r.Time.Before(q.Until) {
				continue
			}
			if len(want) < q.Limit {
				want = append(want, r)
			}
		}
		got, err := s.Records(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", q, diff)
		}
	}
}

// Compaction removes records from sealed blocks and the open one, and
// the stream goes on taking records after it.
func TestRecords_CompactAcrossBlocks(t *testing.T) {
	const n = 3*blockRecords + 40
	s, all, base := recordsOf(t, n)
	cut := blockRecords + 10 // inside the second block
	removed, err := s.CompactRecords(t.Context(), "audit", base.Add(time.Duration(cut)*time.Second))
	if err != nil || removed != cut {
		t.Fatalf("CompactRecords = %d, %v; want %d", removed, err, cut)
	}
	rec := store.Record{Stream: "audit", Time: base.Add(time.Hour), Data: []byte(`{"i":"last"}`)}
	if err := s.records.append(rec, base); err != nil {
		t.Fatal(err)
	}
	rec.Seq = n + 1
	want := append(slices.Clone(all[cut:]), rec)
	got, err := s.Records(t.Context(), store.RecordQuery{Stream: "audit", Limit: store.MaxRecordLimit})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after compaction (-want +got):\n%s", diff)
	}
	if st := s.records.streams["audit"]; st.n != len(want) {
		t.Errorf("the stream counts %d records, holds %d", st.n, len(want))
	}
}

// The record that fills a block compresses it, and the next record
// starts an open one.
func TestRecords_SealedWhenFull(t *testing.T) {
	s := &Store{}
	at := time.Unix(1_800_000_000, 0).UTC()
	add := func(i int) {
		t.Helper()
		if err := s.records.append(store.Record{Stream: "audit", Data: fmt.Appendf(nil, `{"i":%d}`, i)}, at); err != nil {
			t.Fatal(err)
		}
	}
	for i := range blockRecords - 1 {
		add(i)
	}
	if b := s.records.streams["audit"].blocks; len(b) != 1 || b[0].sealed {
		t.Fatalf("%d blocks, the first sealed: %v; want one open block before it is full", len(b), len(b) > 0 && b[0].sealed)
	}
	add(blockRecords - 1)
	b := s.records.streams["audit"].blocks
	if len(b) != 1 || !b[0].sealed {
		t.Fatalf("%d blocks, the first sealed: %v; want the full block sealed", len(b), b[0].sealed)
	}
	if n, err := s2.DecodedLen(b[0].body); err != nil || n <= len(b[0].body) {
		t.Errorf("sealed block of %d bytes decodes to %d (%v); want it compressed", len(b[0].body), n, err)
	}
	add(blockRecords)
	if b := s.records.streams["audit"].blocks; len(b) != 2 || b[1].sealed || b[1].n != 1 {
		t.Errorf("%d blocks; want the next record in a second, open block", len(b))
	}
	got, err := s.Records(t.Context(), store.RecordQuery{Stream: "audit", Limit: store.MaxRecordLimit})
	if err != nil || len(got) != blockRecords+1 || string(got[blockRecords].Data) != fmt.Sprintf(`{"i":%d}`, blockRecords) {
		t.Errorf("read back %d records (%v); want %d, the last one last", len(got), err, blockRecords+1)
	}
}

// A stream keeps MaxRecords records: the oldest go first, one by one, and
// a block of dropped records is let go.
func TestRecords_KeepsMaxRecords(t *testing.T) {
	const n = MaxRecords + blockRecords + 5
	s, all, _ := recordsOf(t, n)
	st := s.records.streams["audit"]
	if st.n != MaxRecords || st.blocks[0].n-st.blocks[0].skip+(len(st.blocks)-1)*blockRecords < MaxRecords {
		t.Errorf("the stream counts %d records in %d blocks; want %d", st.n, len(st.blocks), MaxRecords)
	}
	if kept := (len(st.blocks) - 1) * blockRecords; kept > MaxRecords+blockRecords {
		t.Errorf("%d blocks kept for %d records", len(st.blocks), MaxRecords)
	}
	got, err := s.Records(t.Context(), store.RecordQuery{Stream: "audit", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all[n-MaxRecords:n-MaxRecords+3], got); diff != "" {
		t.Errorf("the oldest kept (-want +got):\n%s", diff)
	}
}

// A damaged block is an error, not a panic, to a reader and to
// compaction, which then changes nothing.
func TestRecords_DamagedBlockIsAnError(t *testing.T) {
	s, _, base := recordsOf(t, 2*blockRecords+1)
	st := s.records.streams["audit"]
	b := &st.blocks[1]
	b.body = b.body[:len(b.body)/2]
	if _, err := s.Records(t.Context(), store.RecordQuery{Stream: "audit", Limit: store.MaxRecordLimit}); err == nil {
		t.Error("reading a damaged block: no error")
	}
	before := slices.Clone(st.blocks)
	if n, err := s.CompactRecords(t.Context(), "audit", base.Add(10*time.Second)); err == nil || n != 0 {
		t.Errorf("compacting through a damaged block = %d, %v; want 0 and an error", n, err)
	}
	if st.n != 2*blockRecords+1 || len(st.blocks) != len(before) || !st.blocks[0].sealed || &st.blocks[0].body[0] != &before[0].body[0] {
		t.Errorf("a failed compaction changed the stream: %d records in %d blocks", st.n, len(st.blocks))
	}
}

// BenchmarkRecordsAppend appends the history records of named Services:
// the cost of a record, sealing its block included.
func BenchmarkRecordsAppend(b *testing.B) {
	s := &Store{}
	at := time.Unix(1_800_000_000, 0).UTC()
	b.ReportAllocs()
	for i := range b.N {
		name := fmt.Sprintf("orders-%d.team-%d", i, i%37)
		rec := store.Record{Stream: "history", Time: at, Terms: []string{"hostname=" + name + ".svc.mesh.local"},
			Data: fmt.Appendf(nil, `{"zone":"east","mesh":"default","kind":"MeshService","name":%q,"events":[{"hostname":"%s.svc.mesh.local","event":"assigned"}]}`, name, name)}
		if err := s.records.append(rec, at); err != nil {
			b.Fatal(err)
		}
	}
}
