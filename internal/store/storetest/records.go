package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

func appendRecord(r store.Record, dependsOn ...int) store.Op {
	return store.Op{Type: store.OpAppendRecord, Record: &r, DependsOn: dependsOn}
}

// recorder returns the store as a store.Recorder, or skips the test.
func (e *env) recorder(t *testing.T) store.Recorder {
	t.Helper()
	r, ok := e.s.(store.Recorder)
	if !ok {
		t.Skip("the store keeps no record streams (store.Recorder)")
	}
	return r
}

func (e *env) records(t *testing.T, q store.RecordQuery) []store.Record {
	t.Helper()
	rs, err := e.recorder(t).Records(e.ctx, q)
	if err != nil {
		t.Fatalf("Records(%+v) = %v", q, err)
	}
	return rs
}

func seqs(rs []store.Record) []int64 {
	out := []int64{}
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

// recordOpts compares records: empty data may read back as nil.
var recordOpts = cmpopts.EquateEmpty()

func testRecordsAppendAndQuery(t *testing.T, e *env) {
	e.recorder(t)
	now := e.clock.Now()
	at := func(d time.Duration) time.Time { return now.Add(d) }
	in := []store.Record{
		{Stream: "audit", Time: at(1 * time.Second), Terms: []string{"kind=MeshService", "name=redis", "subject=alice"}, Data: []byte(`{"n":1}`)},
		{Stream: "history", Time: at(2 * time.Second), Terms: []string{"vip=241.0.0.1", "name=redis"}, Data: []byte{0, 1, 0xff}},
		{Stream: "audit", Time: at(3 * time.Second), Terms: []string{"kind=Mesh", "name=default", "subject=bob"}, Data: []byte(`{"n":2}`)},
		{Stream: "audit", Terms: []string{"kind=MeshService", "name=redis", "subject=bob", "name=redis"}}, // no time: the store's clock
		{Stream: "audit", Time: at(5 * time.Second), Terms: []string{"name=ünïcode ok", "kind=MeshService"}},
	}
	var ops []store.Op
	for _, r := range in {
		ops = append(ops, appendRecord(r))
	}
	rs := e.applyOK(t, ops...)
	for i, r := range rs {
		if r.Revision != 0 || r.Object != nil {
			t.Errorf("op %d: Revision %d, Object %v; a record op has neither", i, r.Revision, r.Object)
		}
	}
	all := e.records(t, store.RecordQuery{Stream: "audit"})
	want := []store.Record{in[0], in[2], in[3], in[4]}
	want[2].Time = now // the store's clock
	for i := range want {
		want[i].Seq = all[min(i, len(all)-1)].Seq
	}
	if diff := cmp.Diff(want, all, recordOpts); diff != "" {
		t.Fatalf("Records(audit) (-want +got):\n%s", diff)
	}
	// Sequence numbers increase across streams in append order.
	hist := e.records(t, store.RecordQuery{Stream: "history"})
	if len(hist) != 1 || !(all[0].Seq < hist[0].Seq && hist[0].Seq < all[1].Seq) {
		t.Errorf("seqs: audit %v, history %v; want history's between the first two of audit", seqs(all), seqs(hist))
	}
	s := seqs(all)
	for _, tc := range []struct {
		name string
		q    store.RecordQuery
		want []int64
	}{
		{"Term", store.RecordQuery{Terms: []string{"name=redis"}}, []int64{s[0], s[2]}},
		{"TwoTerms", store.RecordQuery{Terms: []string{"name=redis", "subject=bob"}}, []int64{s[2]}},
		{"TermTwice", store.RecordQuery{Terms: []string{"subject=bob", "subject=bob"}}, []int64{s[1], s[2]}},
		{"TermOfAnotherStream", store.RecordQuery{Terms: []string{"vip=241.0.0.1"}}, []int64{}},
		{"UnknownTerm", store.RecordQuery{Terms: []string{"name=none"}}, []int64{}},
		{"Unicode", store.RecordQuery{Terms: []string{"name=ünïcode ok"}}, []int64{s[3]}},
		{"TermPrefixIsNoMatch", store.RecordQuery{Terms: []string{"name=red"}}, []int64{}},
		{"Since", store.RecordQuery{Since: at(3 * time.Second)}, []int64{s[1], s[3]}},
		{"Until", store.RecordQuery{Until: at(3 * time.Second)}, []int64{s[0], s[2]}},
		{"SinceUntil", store.RecordQuery{Since: at(time.Second), Until: at(5 * time.Second)}, []int64{s[0], s[1]}},
		{"After", store.RecordQuery{After: s[1]}, []int64{s[2], s[3]}},
		{"Before", store.RecordQuery{Before: s[2]}, []int64{s[0], s[1]}},
		{"Limit", store.RecordQuery{Limit: 2}, []int64{s[0], s[1]}},
		{"Descending", store.RecordQuery{Descending: true}, []int64{s[3], s[2], s[1], s[0]}},
		{"DescendingLimitBefore", store.RecordQuery{Descending: true, Limit: 2, Before: s[3]}, []int64{s[2], s[1]}},
		{"Everything", store.RecordQuery{Terms: []string{"kind=MeshService"}, Since: at(time.Second), Until: at(time.Hour), After: s[0], Limit: 1, Descending: true}, []int64{s[3]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Stream = "audit"
			if diff := cmp.Diff(tc.want, seqs(e.records(t, tc.q))); diff != "" {
				t.Errorf("Records(%+v) seqs (-want +got):\n%s", tc.q, diff)
			}
		})
	}
	if got := e.records(t, store.RecordQuery{Stream: "empty-stream"}); len(got) != 0 {
		t.Errorf("Records of an empty stream = %v", got)
	}
	// Records are outside the change feed and take no revision.
	if _, rev, err := e.s.List(e.ctx, ""); err != nil || rev != 0 {
		t.Errorf("List revision = %d, %v; want 0", rev, err)
	}
	if evs := e.changes(t, 0, 0); len(evs) != 0 {
		t.Errorf("Changes = %v; records are not in the change feed", evs)
	}
	// Results belong to the caller.
	got := e.records(t, store.RecordQuery{Stream: "audit", Limit: 1})
	got[0].Data[0], got[0].Terms[0] = 'X', "changed"
	if again := e.records(t, store.RecordQuery{Stream: "audit", Limit: 1}); again[0].Data[0] != '{' || again[0].Terms[0] != "kind=MeshService" {
		t.Errorf("changing a result changed the store: %+v", again[0])
	}
}

// testRecordsDependOnTheirWrite checks DependsOn: a record of a write
// commits with the write, and only with it.
func testRecordsDependOnTheirWrite(t *testing.T, e *env) {
	e.recorder(t)
	svc := e.create(t, meshService(mesh, "web"))
	stale := svc.Clone()
	stale.Version = 9
	ops := []store.Op{
		{Type: store.OpCreate, Object: meshService(mesh, "new")},
		appendRecord(store.Record{Stream: "audit", Terms: []string{"op=0"}}, 0),
		{Type: store.OpUpdate, Object: stale}, // conflict
		appendRecord(store.Record{Stream: "audit", Terms: []string{"op=2"}}, 2),
		appendRecord(store.Record{Stream: "audit", Terms: []string{"op=0,2"}}, 0, 2),
		appendRecord(store.Record{Stream: "audit", Terms: []string{"forward"}}, 6),
		appendRecord(store.Record{Stream: "audit", Terms: []string{"self"}}, 6),
		appendRecord(store.Record{Stream: "audit", Terms: []string{"negative"}}, -1),
		appendRecord(store.Record{Stream: "audit", Terms: []string{"on a record"}}, 1),
		{Type: store.OpDelete, Key: svc.Key(), DependsOn: []int{2}}, // a resource op may depend too
	}
	rs := e.apply(t, ops...)
	for i, wantOK := range []bool{true, true, false, false, false, false, false, false, true, false} {
		if (rs[i].Err == nil) != wantOK {
			t.Errorf("op %d: Err = %v, want success %v", i, rs[i].Err, wantOK)
		}
	}
	for _, i := range []int{3, 4, 9} {
		wantErr(t, fmt.Sprintf("op %d", i), rs[i].Err, store.ErrDependencyFailed)
	}
	for _, i := range []int{5, 6, 7} {
		if rs[i].Err == nil || errors.Is(rs[i].Err, store.ErrDependencyFailed) || !strings.Contains(rs[i].Err.Error(), "does not come before it") {
			t.Errorf("op %d: Err = %v, want a refusal of its DependsOn", i, rs[i].Err)
		}
	}
	var terms []string
	for _, r := range e.records(t, store.RecordQuery{Stream: "audit"}) {
		terms = append(terms, r.Terms...)
	}
	if diff := cmp.Diff([]string{"op=0", "on a record"}, terms); diff != "" {
		t.Errorf("records written (-want +got):\n%s", diff)
	}
	if _, err := e.s.Get(e.ctx, svc.Key()); err != nil {
		t.Errorf("the delete that depended on a failed op ran: %v", err)
	}
}

func testInvalidRecords(t *testing.T, e *env) {
	e.recorder(t)
	tooMany := make([]string, store.MaxRecordTerms+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("t", i)
	}
	ops := []store.Op{
		{Type: store.OpAppendRecord},
		appendRecord(store.Record{}),
		appendRecord(store.Record{Stream: "Audit"}),
		appendRecord(store.Record{Stream: "au dit"}),
		appendRecord(store.Record{Stream: strings.Repeat("a", 64)}),
		appendRecord(store.Record{Stream: "audit", Terms: []string{""}}),
		appendRecord(store.Record{Stream: "audit", Terms: []string{"tab\there"}}),
		appendRecord(store.Record{Stream: "audit", Terms: []string{"bad\xff"}}),
		appendRecord(store.Record{Stream: "audit", Terms: []string{strings.Repeat("t", store.MaxRecordTermBytes+1)}}),
		appendRecord(store.Record{Stream: "audit", Terms: tooMany}),
		appendRecord(store.Record{Stream: "audit", Data: make([]byte, store.MaxRecordBytes+1)}),
		appendRecord(store.Record{Stream: "audit", Time: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}),
		appendRecord(store.Record{Stream: "audit-2", Terms: []string{strings.Repeat("t", store.MaxRecordTermBytes)}, Data: make([]byte, store.MaxRecordBytes)}),
	}
	rs := e.apply(t, ops...)
	for i, r := range rs[:len(rs)-1] {
		if r.Err == nil {
			t.Errorf("op %d (%+v): Err = nil, want an error", i, ops[i].Record)
		}
	}
	if err := rs[len(rs)-1].Err; err != nil {
		t.Errorf("largest valid record: %v", err)
	}
	wantErr(t, "op 10 (data too large)", rs[10].Err, store.ErrTooLarge)
	if got := e.records(t, store.RecordQuery{Stream: "audit"}); len(got) != 0 {
		t.Errorf("invalid records were written: %v", got)
	}
	if got := e.records(t, store.RecordQuery{Stream: "audit-2"}); len(got) != 1 || len(got[0].Data) != store.MaxRecordBytes {
		t.Errorf("largest valid record read back as %d records", len(got))
	}
	for _, q := range []store.RecordQuery{{}, {Stream: "Bad"}, {Stream: "audit", Terms: []string{""}}} {
		if _, err := e.recorder(t).Records(e.ctx, q); err == nil {
			t.Errorf("Records(%+v) = nil error, want an error", q)
		}
	}
}

// testConcurrentRecords appends from many goroutines at once; sequence
// numbers are unique and every record is there once.
func testConcurrentRecords(t *testing.T, e *env) {
	e.recorder(t)
	const writers, each = 8, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				ops := []store.Op{appendRecord(store.Record{Stream: "log", Terms: []string{fmt.Sprint("w=", w)}, Data: []byte(fmt.Sprint(w, "/", i))})}
				if i%4 == 0 {
					ops = append(ops, store.Op{Type: store.OpCreate, Object: meshService(mesh, fmt.Sprintf("w%d-%d", w, i))})
				}
				rs, err := e.s.Apply(e.ctx, ops...)
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range rs {
					if r.Err != nil {
						t.Error(r.Err)
					}
				}
			}
		})
	}
	wg.Wait()
	got := e.records(t, store.RecordQuery{Stream: "log", Limit: store.MaxRecordLimit})
	if len(got) != writers*each {
		t.Fatalf("%d records, want %d", len(got), writers*each)
	}
	seen := map[string]bool{}
	for i, r := range got {
		if i > 0 && r.Seq <= got[i-1].Seq {
			t.Errorf("record %d has seq %d after %d", i, r.Seq, got[i-1].Seq)
		}
		if seen[string(r.Data)] {
			t.Errorf("record %s twice", r.Data)
		}
		seen[string(r.Data)] = true
	}
	if w3 := e.records(t, store.RecordQuery{Stream: "log", Terms: []string{"w=3"}}); len(w3) != each {
		t.Errorf("records of writer 3: %d, want %d", len(w3), each)
	}
	if evs := e.changes(t, 0, 0); len(evs) != writers*each/4 {
		t.Errorf("change feed has %d events, want the %d creates", len(evs), writers*each/4)
	}
}

func testCompactRecords(t *testing.T, e *env) {
	r := e.recorder(t)
	now := e.clock.Now()
	var ops []store.Op
	for i := range 6 {
		for _, stream := range []string{"audit", "history"} {
			ops = append(ops, appendRecord(store.Record{Stream: stream, Time: now.Add(time.Duration(i) * time.Hour), Terms: []string{fmt.Sprint("i=", i), "all"}}))
		}
	}
	e.applyOK(t, ops...)
	n, err := r.CompactRecords(e.ctx, "audit", now.Add(3*time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("CompactRecords = %d, %v; want 3", n, err)
	}
	var is []string
	for _, rec := range e.records(t, store.RecordQuery{Stream: "audit"}) {
		is = append(is, rec.Terms[0])
	}
	if diff := cmp.Diff([]string{"i=3", "i=4", "i=5"}, is); diff != "" {
		t.Errorf("audit after compaction (-want +got):\n%s", diff)
	}
	// The terms went with the records; other streams are untouched.
	if got := e.records(t, store.RecordQuery{Stream: "audit", Terms: []string{"i=1"}}); len(got) != 0 {
		t.Errorf("a compacted record is still found by its term: %v", got)
	}
	if got := e.records(t, store.RecordQuery{Stream: "audit", Terms: []string{"all"}}); len(got) != 3 {
		t.Errorf("Records(all) after compaction = %d, want 3", len(got))
	}
	if got := e.records(t, store.RecordQuery{Stream: "history"}); len(got) != 6 {
		t.Errorf("history after compacting audit: %d records, want 6", len(got))
	}
	if n, err := r.CompactRecords(e.ctx, "audit", now.Add(3*time.Hour)); err != nil || n != 0 {
		t.Errorf("second CompactRecords = %d, %v; want 0", n, err)
	}
	if _, err := r.CompactRecords(e.ctx, "", now); err == nil {
		t.Error("CompactRecords of an invalid stream succeeded")
	}
	// Appends go on after compaction with higher sequence numbers.
	last := e.records(t, store.RecordQuery{Stream: "history", Descending: true, Limit: 1})[0].Seq
	e.applyOK(t, appendRecord(store.Record{Stream: "audit"}))
	if got := e.records(t, store.RecordQuery{Stream: "audit", Descending: true, Limit: 1}); got[0].Seq <= last {
		t.Errorf("seq after compaction %d, want above %d", got[0].Seq, last)
	}
}

// testCompactRecordsOutOfOrder compacts records whose times are not in
// the order of their sequence numbers: times given by their writers, and
// the store's clock set back, on both sides of a reopen.
func testCompactRecordsOutOfOrder(t *testing.T, e *env) {
	start := e.clock.Now()
	at := func(h int) time.Time { return start.Add(time.Duration(h) * time.Hour) }
	add := func(name string, when time.Time) {
		e.applyOK(t, appendRecord(store.Record{Stream: "audit", Time: when, Terms: []string{"n=" + name, "all"}}))
	}
	e.clock.Advance(5 * time.Hour)
	add("clock5", time.Time{}) // the store's clock
	add("given1", at(1))
	e.clock.Advance(time.Hour)
	add("clock6", time.Time{})
	add("given2", at(2))
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	e.s = e.reopen()
	r := e.recorder(t)
	add("given0", at(0))
	e.clock.Advance(-3 * time.Hour) // set back
	add("clock3", time.Time{})
	e.clock.Advance(4 * time.Hour)
	add("clock7", time.Time{})
	n, err := r.CompactRecords(e.ctx, "audit", at(4))
	if err != nil || n != 4 {
		t.Fatalf("CompactRecords before hour 4 = %d, %v; want 4", n, err)
	}
	var names []string
	for _, rec := range e.records(t, store.RecordQuery{Stream: "audit", Terms: []string{"all"}}) {
		names = append(names, rec.Terms[0])
	}
	if diff := cmp.Diff([]string{"n=clock5", "n=clock6", "n=clock7"}, names); diff != "" {
		t.Errorf("audit after compaction (-want +got):\n%s", diff)
	}
	for _, gone := range []string{"given0", "given1", "given2", "clock3"} {
		if got := e.records(t, store.RecordQuery{Stream: "audit", Terms: []string{"n=" + gone}}); len(got) != 0 {
			t.Errorf("compacted record %s is still found by its term", gone)
		}
	}
	if n, err := r.CompactRecords(e.ctx, "audit", at(4)); err != nil || n != 0 {
		t.Errorf("second CompactRecords = %d, %v; want 0", n, err)
	}
	if n, err := r.CompactRecords(e.ctx, "audit", at(8)); err != nil || n != 3 {
		t.Errorf("CompactRecords before hour 8 = %d, %v; want 3", n, err)
	}
}

func testRecordsSurviveReopen(t *testing.T, e *env) {
	e.recorder(t)
	e.applyOK(t, appendRecord(store.Record{Stream: "audit", Terms: []string{"a"}, Data: []byte("1")}),
		store.Op{Type: store.OpCreate, Object: meshService(mesh, "web")})
	before := e.records(t, store.RecordQuery{Stream: "audit"})
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.recorder(t).Records(e.ctx, store.RecordQuery{Stream: "audit"}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Records after Close = %v, want ErrClosed", err)
	}
	e.s = e.reopen()
	if diff := cmp.Diff(before, e.records(t, store.RecordQuery{Stream: "audit"}), recordOpts); diff != "" {
		t.Errorf("records after reopen (-want +got):\n%s", diff)
	}
	e.applyOK(t, appendRecord(store.Record{Stream: "audit", Terms: []string{"b"}}))
	after := e.records(t, store.RecordQuery{Stream: "audit"})
	if len(after) != 2 || after[1].Seq <= before[0].Seq {
		t.Errorf("append after reopen: %v; want a second record with a higher seq", seqs(after))
	}
	if _, err := e.s.Get(e.ctx, resource.Key{Kind: resource.MeshService, Mesh: mesh, Name: "web"}); err != nil {
		t.Error(err)
	}
}

// testManyRecordsInOneApply appends more records, with more terms, in one
// transaction than a backend may insert in one statement: every record
// and every term is there, in order.
func testManyRecordsInOneApply(t *testing.T, e *env) {
	e.recorder(t)
	const n = 1234
	ops := make([]store.Op, n)
	for i := range n {
		ops[i] = appendRecord(store.Record{Stream: "bulk", Terms: []string{fmt.Sprint("i=", i), fmt.Sprint("mod=", i%7), "all"}, Data: []byte(fmt.Sprint(i))})
	}
	e.applyOK(t, ops...)
	var got []store.Record
	for after := int64(0); ; {
		page := e.records(t, store.RecordQuery{Stream: "bulk", Terms: []string{"all"}, After: after, Limit: store.MaxRecordLimit})
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].Seq
	}
	if len(got) != n {
		t.Fatalf("%d records, want %d", len(got), n)
	}
	for i, r := range got {
		if string(r.Data) != fmt.Sprint(i) || (i > 0 && r.Seq != got[i-1].Seq+1) {
			t.Fatalf("record %d: data %q, seq %d after %d", i, r.Data, r.Seq, got[max(i-1, 0)].Seq)
		}
	}
	if mod3 := e.records(t, store.RecordQuery{Stream: "bulk", Terms: []string{"mod=3"}, Limit: store.MaxRecordLimit}); len(mod3) != (n+3)/7 {
		t.Errorf("records with term mod=3: %d, want %d", len(mod3), (n+3)/7)
	}
	if last := e.records(t, store.RecordQuery{Stream: "bulk", Terms: []string{fmt.Sprint("i=", n-1)}}); len(last) != 1 || string(last[0].Data) != fmt.Sprint(n-1) {
		t.Errorf("the last record by its own term: %+v", last)
	}
}
