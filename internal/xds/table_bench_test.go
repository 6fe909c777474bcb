package xds

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// benchTable is a mesh table of n services as BenchmarkXDS (bench/)
// makes them: one http port, a VIP, a hostname and one endpoint each.
func benchTable(b *testing.B, n int) *meshTable {
	b.Helper()
	t := newMeshTable()
	for i := range n {
		t.put(benchService(i))
	}
	return t
}

func benchService(i int) (resource.Key, map[string]string, []Resource) {
	name := fmt.Sprintf("svc-%06d", i)
	k := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name}
	svc := &Service{
		Key: k, Labels: map[string]string{"kuma.io/mesh": "default"},
		Ports:     []Port{{Port: 80, Name: "http", Protocol: "http"}},
		VIPs:      []netip.Addr{netip.AddrFrom4([4]byte{241, 0, byte(i >> 8), byte(i)})},
		Hostnames: []string{name + ".svc.mesh.local"},
		Endpoints: map[int][]Endpoint{80: {{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 8080)}}},
	}
	return k, svc.Labels, Render(svc)
}

// benchStream is a delta stream subscribed to every type with a
// wildcard, as xdsload's proxies are.
func benchStream(t *meshTable) *stream {
	s := &stream{delta: true, table: t, wakeCh: make(chan struct{}, 1)}
	for typ := range numTypes {
		s.types[typ] = &typeState{names: set[string]{}}
		s.types[typ].subscribe(true, true, nil, nil, fullState(typ))
	}
	return s
}

// BenchmarkFirstConfig is a proxy's first config at 10,000 services: what
// to send of each type, and its encoding (shared by every plain wildcard
// proxy: made by the first op).
func BenchmarkFirstConfig(b *testing.B) {
	t := benchTable(b, 10_000)
	bytes := 0
	defer cpuPerOp(b)()
	for b.Loop() {
		s := benchStream(t)
		for typ := range numTypes {
			bytes += encode(s.compute(typ), true).data.Len()
		}
	}
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/op")
}

// BenchmarkPush is one new service at 10,000 sent to 100 streams that
// had everything before it: the table's change, then each stream's
// response and its encoding (per stream: cpu-ns/stream).
func BenchmarkPush(b *testing.B) {
	const streams = 100
	t := benchTable(b, 10_000)
	ss := make([]*stream, streams)
	for i := range ss {
		ss[i] = benchStream(t)
		for typ := range numTypes {
			ss[i].compute(typ)
		}
	}
	i := 10_000
	defer cpuPerOp(b)()
	for b.Loop() {
		t.put(benchService(i))
		i++
		for _, s := range ss {
			for typ := range numTypes {
				if o := s.compute(typ); o != nil {
					encode(o, true)
				}
			}
		}
	}
}

// cpuPerOp reports the process's CPU time per op (the function it returns
// ends the measurement): on a machine shared with other work, wall time
// per op says more about the neighbours.
func cpuPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
	}
}
