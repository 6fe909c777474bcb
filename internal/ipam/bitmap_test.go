package ipam

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// naiveNextClear is the obvious scan the bitmap must agree with.
func naiveNextClear(set []bool, from, to uint64) (uint64, bool) {
	for i := from; i < to; i++ {
		if !set[i] {
			return i, true
		}
	}
	return 0, false
}

// TestBitmap_NextClear compares nextClear with a naive scan on dense and
// sparse bitmaps of a few pages, filled with full pages, full words, runs
// crossing word and page boundaries and scattered bits, then partly cleared.
func TestBitmap_NextClear(t *testing.T) {
	for _, dense := range []bool{true, false} {
		for _, size := range []uint64{64, 100, pageBits, 3*pageBits + 100, 4 * pageBits} {
			t.Run(fmt.Sprintf("dense-%v-size-%d", dense, size), func(t *testing.T) {
				for seed := range 20 {
					r := rand.New(rand.NewPCG(uint64(seed), size))
					b := newBitmap(size, dense)
					set := make([]bool, size)
					put := func(i uint64) {
						if i < size && !set[i] {
							b.set(i)
							set[i] = true
						}
					}
					for range 1 + r.IntN(6) {
						// A run of random length at a random place: up to
						// two pages, so whole pages and words fill up.
						start, n := r.Uint64N(size), r.Uint64N(2*pageBits)
						for i := start; i < start+n; i++ {
							put(i)
						}
					}
					for range r.IntN(200) {
						put(r.Uint64N(size))
					}
					for range r.IntN(20) {
						if i := r.Uint64N(size); set[i] {
							b.clear(i)
							set[i] = false
						}
					}
					check := func(from, to uint64) {
						t.Helper()
						got, gotOK := b.nextClear(from, to)
						want, wantOK := naiveNextClear(set, from, to)
						if got != want || gotOK != wantOK {
							t.Fatalf("seed %d: nextClear(%d, %d) = %d, %v; want %d, %v", seed, from, to, got, gotOK, want, wantOK)
						}
					}
					for range 200 {
						from, to := r.Uint64N(size+1), r.Uint64N(size+1)
						check(from, to)
						check(from, size)
						check(0, to)
					}
					for i := range size {
						if b.test(i) != set[i] {
							t.Fatalf("seed %d: test(%d) = %v, want %v", seed, i, b.test(i), set[i])
						}
					}
					if !dense {
						for pi, pg := range b.sparse {
							if pg.n == 0 {
								t.Fatalf("seed %d: sparse bitmap keeps empty page %d", seed, pi)
							}
						}
					}
				}
			})
		}
	}
}

// TestPool_LargeMemory checks that a pool's memory follows the addresses it
// holds, not its size: building a /64 or a /8 allocates little, and a /64
// with 100,000 addresses allocated holds about 25 pages.
func TestPool_LargeMemory(t *testing.T) {
	// TotalAlloc counts every goroutine's allocations (parallel tests, the
	// runtime): the least of three runs is f's own.
	allocated := func(f func()) uint64 {
		least := uint64(1 << 62)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			f()
			runtime.ReadMemStats(&after)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	var p *Pool
	for _, tt := range []struct {
		prefix string
		max    uint64
	}{
		{"fd00::/64", 1 << 10},
		{"::/0", 1 << 10},
		{"241.0.0.0/8", 40 << 10}, // the page slice (32 KiB) and full-page bitset
		{"240.0.0.0/4", 1 << 10},  // 2^28 addresses: sparse
	} {
		// TotalAlloc counts every goroutine's allocations (the race
		// detector's, the test framework's): the least of a few runs is
		// the pool's own.
		got := uint64(math.MaxUint64)
		for range 3 {
			got = min(got, allocated(func() {
				var err error
				if p, err = NewPool(netip.MustParsePrefix(tt.prefix)); err != nil {
					t.Fatal(err)
				}
			}))
		}
		if got > tt.max {
			t.Errorf("NewPool(%s) allocated %d bytes, want at most %d", tt.prefix, got, tt.max)
		}
	}

	p, err := NewPool(netip.MustParsePrefix("fd00::/64"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 100_000 {
		if _, err := p.Allocate(now); err != nil {
			t.Fatal(err)
		}
	}
	if got, max := p.bytes(), uint64(64<<10); got > max {
		t.Errorf("a /64 with 100,000 addresses holds about %d bytes, want at most %d", got, max)
	}
	if got := len(p.taken.sparse); got != 25 {
		t.Errorf("a /64 with 100,000 addresses holds %d pages, want 25", got)
	}
}
