package extsvc

import (
	"fmt"
	"net/netip"
	"testing"
)

// benchServices returns n external services of one mesh: service i captures
// the /24 10.<i/256>.<i%256>.0 and the address 192.168.<i/256>.<i%256> on
// port 443, and its /24 on port 80. Every tenth also captures an address in
// the /24 of the next service on port 443, so there are n/10 overlapping
// pairs; every thousandth captures a /16 on port 443, overlapping 256
// services.
func benchServices(n int) []Service {
	svcs := make([]Service, n)
	for i := range n {
		cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i / 256), byte(i % 256), 0}), 24)
		ip := netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(i / 256), byte(i % 256)}), 32)
		r := map[int][]netip.Prefix{443: {cidr, ip}, 80: {cidr}}
		if i%10 == 0 {
			j := i + 1
			r[443] = append(r[443], netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(j / 256), byte(j % 256), 9}), 32))
		}
		if i%1000 == 0 {
			r[443] = append(r[443], netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i/256 + 1), 0, 0}), 16))
		}
		svcs[i] = Service{Key: Key{"default", fmt.Sprintf("ext-%05d", i)}, Ranges: r}
	}
	return svcs
}

// BenchmarkEngine_Load_10k builds the engine from 10,000 services, as the
// controller does when it starts.
func BenchmarkEngine_Load_10k(b *testing.B) {
	svcs := benchServices(10_000)
	b.ReportAllocs()
	for b.Loop() {
		e := NewEngine()
		e.Load(svcs)
		if e.Pairs() == 0 {
			b.Fatal("no overlaps")
		}
	}
}

// BenchmarkEngine_OneChange_10k changes one service among 10,000 in one
// mesh, back and forth between overlapping another service and not, and
// computes the conditions of the services it marks dirty: what the
// controller does for one event before writing.
func BenchmarkEngine_OneChange_10k(b *testing.B) {
	benchChange(b, 5003, map[int][]netip.Prefix{443: {netip.MustParsePrefix("10.30.7.0/24")}})
}

// BenchmarkEngine_OneChange_Wide_10k changes a service whose /16 overlaps
// 256 others: the work is proportional to what the change meets.
func BenchmarkEngine_OneChange_Wide_10k(b *testing.B) {
	benchChange(b, 5000, map[int][]netip.Prefix{443: {netip.MustParsePrefix("10.21.0.0/16")}})
}

// benchChange sets service i of benchServices(10_000) alternately to
// ranges and back to its own.
func benchChange(b *testing.B, i int, ranges map[int][]netip.Prefix) {
	svcs := benchServices(10_000)
	e := NewEngine()
	e.Load(svcs)
	e.TakeDirty()
	e.TakeEvents()
	states := []Service{svcs[i], {Key: svcs[i].Key, Ranges: ranges}}
	b.ReportAllocs()
	dirty, n := 0, 0
	for b.Loop() {
		n++
		e.Set(states[n%2])
		for _, k := range e.TakeDirty() {
			_ = condition(k.Name, e.Overlaps(k))
			dirty++
		}
		e.TakeEvents()
	}
	b.ReportMetric(float64(dirty)/float64(n), "dirty/op")
}
