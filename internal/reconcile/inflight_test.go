package reconcile

import (
	"reflect"
	"testing"
)

// TestInflight checks the bookkeeping of writes in flight, and that its
// map is given back as it empties after a peak over keepPending.
func TestInflight(t *testing.T) {
	tests := []struct {
		name    string
		put     int // entries put, keys 0..put-1, at revisions 1..put
		forget  int // then forgotten, keys 0..forget-1
		wantMap bool
		// wantRebuilt: the map was replaced by a smaller one.
		wantRebuilt bool
	}{
		{"Empty", 0, 0, false, false},
		{"AllForgottenKeepsItsMapForTheNextBatch", 10, 10, true, false},
		{"PeakAtTheBoundKeepsItsMap", keepPending, keepPending, true, false},
		{"SmallPeakKeepsItsMap", keepPending - 1, keepPending - 5, true, false},
		{"ThreeQuartersForgottenKeepsItsMap", 4 * keepPending, 3 * keepPending, true, false},
		{"MoreThanThreeQuartersForgottenShrinks", 4 * keepPending, 3*keepPending + 1, true, true},
		{"LargeAllForgottenEndsOnASmallMap", keepPending + 1, keepPending + 1, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Inflight[int, string]
			for i := range tt.put {
				f.Put(i, "v")
				f.Written(i, int64(i+1))
			}
			before := f.m
			for i := range tt.forget {
				f.Forget(i)
				f.Forget(i) // again: nothing
			}
			if got, want := f.Len(), tt.put-tt.forget; got != want {
				t.Errorf("Len = %d, want %d", got, want)
			}
			if (f.m != nil) != tt.wantMap {
				t.Errorf("has a map = %v, want %v", f.m != nil, tt.wantMap)
			}
			if tt.wantMap {
				rebuilt := reflect.ValueOf(f.m).UnsafePointer() != reflect.ValueOf(before).UnsafePointer()
				if rebuilt != tt.wantRebuilt {
					t.Errorf("map rebuilt = %v, want %v", rebuilt, tt.wantRebuilt)
				}
			}
			for i := tt.forget; i < tt.put; i++ {
				// The cache one revision behind the write: still pending.
				if v, ok := f.Pending(i, int64(i)); !ok || v != "v" {
					t.Errorf("Pending(%d) behind the write = %q, %v", i, v, ok)
				}
			}
		})
	}
}

// Pending gives the written value only while the cache is behind the
// write, and forgets it once the cache caught up.
func TestInflight_Pending(t *testing.T) {
	for _, tc := range []struct {
		name     string
		written  int64 // 0: the write is under way
		cacheRev int64
		pending  bool
	}{
		{"CacheBehind", 10, 9, true},
		{"CacheShowsTheWrite", 10, 10, false},
		{"CacheAhead", 10, 11, false},
		{"CopyWithoutRevision", 10, 0, false},
		{"WriteUnderWay", 0, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Inflight[string, int]
			f.Put("k", 7)
			if tc.written != 0 {
				f.Written("k", tc.written)
			}
			v, ok := f.Pending("k", tc.cacheRev)
			if ok != tc.pending || (ok && v != 7) {
				t.Fatalf("Pending = %d, %v, want pending %v", v, ok, tc.pending)
			}
			if wantLen := map[bool]int{true: 1, false: 0}[tc.pending]; f.Len() != wantLen {
				t.Errorf("Len after Pending = %d, want %d", f.Len(), wantLen)
			}
		})
	}
	var f Inflight[string, int]
	if _, ok := f.Pending("absent", 5); ok {
		t.Error("Pending of nothing written")
	}
}

func TestDigest(t *testing.T) {
	var d Digest
	sum := func(fields ...string) uint64 {
		d.Reset()
		for _, f := range fields {
			d.String(f)
		}
		return d.Sum()
	}
	ab := sum("a", "b")
	for _, other := range [][]string{{"ab"}, {"a", "b", ""}, {"", "ab"}, {"b", "a"}, {"a", "c"}, {}} {
		if ab == sum(other...) {
			t.Errorf("%q sums like [a b]", other)
		}
	}
	if again := sum("a", "b"); again != ab {
		t.Errorf("[a b] sums to %x, then to %x after others", ab, again)
	}
}

// BenchmarkInflight_Batches records and forgets batches of 1,000 writes,
// as a zone's runner does through an initial sync.
func BenchmarkInflight_Batches(b *testing.B) {
	var f Inflight[int, uint64]
	b.ReportAllocs()
	for b.Loop() {
		for i := range 1000 {
			f.Put(i, uint64(i))
			f.Written(i, int64(i+1))
		}
		for i := range 1000 {
			if _, ok := f.Pending(i, int64(i+1)); ok {
				b.Fatal("still pending once the cache shows the write")
			}
		}
	}
}
