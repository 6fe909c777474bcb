package ipam

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
)

// The benchmarks of issue 4 for the pool alone: allocating 1,000,000
// addresses from a /8, one Allocate in a nearly full pool, and Allocate in an
// exhausted pool, which must cost the same whatever the pool's size.

var benchNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func benchPool(b *testing.B, prefix string) *Pool {
	b.Helper()
	p, err := NewPool(netip.MustParsePrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// fill allocates every address of p.
func fill(b *testing.B, p *Pool) {
	b.Helper()
	for range p.Size() {
		if _, err := p.Allocate(benchNow); err != nil {
			b.Fatal(err)
		}
	}
}

// retained returns the heap bytes that build leaves reachable, measured
// after a garbage collection on each side.
func retained(build func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return after.HeapAlloc - before.HeapAlloc
}

// retained1M measures, once, the memory of a /8 holding 1,000,000 addresses
// and of a full /8 (16,777,214 addresses).
var retained1M = sync.OnceValues(func() (uint64, uint64) {
	build := func(n int) func() any {
		return func() any {
			p, _ := NewPool(netip.MustParsePrefix("241.0.0.0/8"))
			for range n {
				if _, err := p.Allocate(benchNow); err != nil {
					panic(err)
				}
			}
			return p
		}
	}
	return retained(build(1_000_000)), retained(build(1<<24 - 2))
})

// BenchmarkPool_Allocate1M allocates from fresh 241.0.0.0/8 pools, a new one
// every 1,000,000 addresses (outside the timer): ns/op is the cost of one
// Allocate, ms/1M that of a million. retained-B is the heap a /8 holds with
// 1M addresses allocated, full-retained-B with all 16,777,214.
func BenchmarkPool_Allocate1M(b *testing.B) {
	const n = 1_000_000
	one, full := retained1M()
	b.ReportAllocs()
	b.ResetTimer()
	var p *Pool
	for i := range b.N {
		if i%n == 0 {
			b.StopTimer()
			p = benchPool(b, "241.0.0.0/8")
			b.StartTimer()
		}
		if _, err := p.Allocate(benchNow); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*n/1e6, "ms/1M")
	b.ReportMetric(float64(one), "retained-B")
	b.ReportMetric(float64(full), "full-retained-B")
}

// BenchmarkPool_AllocateNearFull measures Allocate in a /16 with 99% of its
// addresses used, the free 1% scattered at random. Each op allocates and
// releases the address at once (with a quarantine already over), so the
// pool stays 99% used while the cursor moves round it; the op includes the
// Release and dropping the quarantine.
func BenchmarkPool_AllocateNearFull(b *testing.B) {
	p := benchPool(b, "10.0.0.0/16")
	fill(b, p)
	r := rand.New(rand.NewPCG(1, 2))
	free := p.Size() / 100
	for released := uint64(0); released < free; {
		a := p.addr(r.Uint64N(p.Size()))
		if err := p.Release(a, time.Time{}); err == nil {
			released++
		}
	}
	p.Expire(benchNow)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		a, err := p.Allocate(benchNow)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Release(a, time.Time{}); err != nil {
			b.Fatal(err)
		}
		if len(p.left) > 1<<16 {
			b.StopTimer()
			p.Expire(benchNow)
			b.StartTimer()
		}
	}
}

// BenchmarkPool_AllocateOneFree is the worst case of the scan: a full /8
// but one address, just behind the cursor, so Allocate walks the whole pool
// (4096 pages, skipped with the full-page bitset) to find it.
func BenchmarkPool_AllocateOneFree(b *testing.B) {
	p := benchPool(b, "241.0.0.0/8")
	fill(b, p)
	a := p.addr(12345)
	if err := p.Release(a, time.Time{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		got, err := p.Allocate(benchNow)
		if err != nil || got != a {
			b.Fatalf("Allocate = %v, %v; want %s", got, err, a)
		}
		if err := p.Release(a, time.Time{}); err != nil {
			b.Fatal(err)
		}
		p.left = p.left[:0]
	}
}

// BenchmarkPool_ExhaustedAllocate measures Allocate on pools with nothing
// free: every address used, or every address quarantined. The cost must not
// depend on the pool's size.
func BenchmarkPool_ExhaustedAllocate(b *testing.B) {
	for _, tt := range []struct {
		name, prefix string
		quarantined  bool
	}{
		{"used-slash24", "10.0.0.0/24", false},
		{"used-slash16", "10.0.0.0/16", false},
		{"used-slash8", "241.0.0.0/8", false},
		{"quarantined-slash24", "10.0.0.0/24", true},
		{"quarantined-slash16", "10.0.0.0/16", true},
	} {
		b.Run(tt.name, func(b *testing.B) {
			p := benchPool(b, tt.prefix)
			fill(b, p)
			if tt.quarantined {
				for off := range p.Size() {
					if err := p.Release(p.addr(off), benchNow.Add(time.Hour)); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := p.Allocate(benchNow); !errors.Is(err, ErrExhausted) {
					b.Fatalf("Allocate = %v, want ErrExhausted", err)
				}
			}
		})
	}
}
