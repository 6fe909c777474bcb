package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// timeKeys counts the keys of the time index.
func timeKeys(t *testing.T, s *Store) int {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.SeekGE([]byte{tTime}); ok && it.Key()[0] == tTime; ok = it.Next() {
		n++
	}
	return n
}

func appendAt(t *testing.T, s *Store, at time.Time, term string) {
	t.Helper()
	rs, err := s.Apply(context.Background(), store.Op{Type: store.OpAppendRecord,
		Record: &store.Record{Stream: "history", Time: at, Terms: []string{term}}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("append %s: %v %v", term, err, rs)
	}
}

// TestRecords_TimeIndexHoldsOnlyLateRecords: a record at or after the
// stream's latest time is written without a time key, one before it with
// one; the latest time survives a reopen, and a store whose records were
// all indexed (written before frontiers) takes it from its time index.
func TestRecords_TimeIndexHoldsOnlyLateRecords(t *testing.T) {
	clock := storetest.NewClock()
	t0 := clock.Now()
	dir := t.TempDir()
	s, err := Open(dir, WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	appendAt(t, s, time.Time{}, "a")         // the clock: in order
	appendAt(t, s, t0.Add(-time.Hour), "b")  // given, older: late
	clock.Advance(time.Minute)               //
	appendAt(t, s, time.Time{}, "c")         // in order
	appendAt(t, s, t0.Add(2*time.Hour), "d") // given, newer: in order
	appendAt(t, s, time.Time{}, "e")         // the clock is behind d: late
	if n := timeKeys(t, s); n != 2 {
		t.Errorf("%d time keys after a, b, c, d, e; want 2 (b and e)", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, WithClock(clock.Now)); err != nil {
		t.Fatal(err)
	}
	appendAt(t, s, time.Time{}, "f") // still behind d, after a reopen
	if n := timeKeys(t, s); n != 3 {
		t.Errorf("%d time keys after f; want 3: the latest time must survive a reopen", n)
	}

	// A store from before frontiers: a record at t0+5h with its time key
	// and no frontier. A record of the clock's (behind it) is late.
	s.writeMu.Lock()
	legacy := s.records + 1000
	if err := s.db.Set(recordKey("audit", legacy), encodeRecord(t0.Add(5*time.Hour).UnixNano(), []string{"old"}, nil), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(timeKey("audit", t0.Add(5*time.Hour).UnixNano(), legacy), nil, nil); err != nil {
		t.Fatal(err)
	}
	s.records = legacy
	s.writeMu.Unlock()
	rs, err := s.Apply(context.Background(), store.Op{Type: store.OpAppendRecord, Record: &store.Record{Stream: "audit", Terms: []string{"new"}}})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	if n := timeKeys(t, s); n != 5 {
		t.Errorf("%d time keys after the legacy record and one after it; want 5 (the new one is late)", n)
	}
	if n, err := s.CompactRecords(context.Background(), "audit", t0.Add(time.Hour)); err != nil || n != 1 {
		t.Errorf("CompactRecords(audit, t0+1h) = %d, %v; want 1 (the new record)", n, err)
	}
	if n, err := s.CompactRecords(context.Background(), "history", t0.Add(3*time.Hour)); err != nil || n != 6 {
		t.Errorf("CompactRecords(history, t0+3h) = %d, %v; want 6", n, err)
	}
	if n := timeKeys(t, s); n != 1 {
		t.Errorf("%d time keys after compacting; want 1 (the legacy record's)", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
