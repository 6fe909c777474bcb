package dnsserver

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/resource"
)

// benchServices are n MeshServices named like bench/dns's:
// svc-<i>.ns-<i%100>.svc.mesh.local on 241.0.0.0+1+i; with srv, each has a
// named port too, so a second name (_http._tcp.<hostname>) and an SRV.
func benchServices(n int, srv bool) []*resource.Object {
	out := make([]*resource.Object, n)
	for i := range n {
		ip := fmt.Sprintf("241.%d.%d.%d", (i+1)>>16&0xff, (i+1)>>8&0xff, (i+1)&0xff)
		o := svc(resource.MeshService, "default", fmt.Sprintf("svc-%d", i), 0, vips(ip), hosts(fmt.Sprintf("svc-%d.ns-%d.svc.mesh.local", i, i%100)))
		if srv {
			o.Spec = &resource.MeshServiceSpec{Ports: []resource.Port{{Name: "http", Port: 80, AppProtocol: "http"}}}
		}
		out[i] = o
	}
	return out
}

// kubeServices are n MeshServices as Kubernetes mode makes them from
// Services svc-<i> in namespaces ns-<i/100>, with a named port: four names
// each, the hostname svc-<i>.ns-<j>.svc.mesh.local and the service tag
// svc-<i>_ns-<j>_svc_80's three.
func kubeServices(n int) []*resource.Object {
	out := make([]*resource.Object, n)
	for i := range n {
		ip := fmt.Sprintf("10.96.%d.%d", (i+1)>>8&0xff, (i+1)&0xff)
		name, ns := fmt.Sprintf("svc-%05d", i), fmt.Sprintf("ns-%03d", i/100)
		out[i] = svc(resource.MeshService, "default", name+"."+ns, 0, vips(ip), hosts(name+"."+ns+".svc.mesh.local"), ports("http:80"),
			tags(name+"_"+ns+"_svc_80"))
	}
	return out
}

// BenchmarkBuildTable builds the table of 100,000 services from scratch,
// as the builder does at start, and reports the heap the table keeps
// (ARCHITECTURE.md section 9: under 60 MiB with 100,000 names).
func BenchmarkBuildTable(b *testing.B) {
	for _, tc := range []struct {
		n   int
		srv bool
	}{{1000, false}, {100000, false}, {100000, true}} {
		name := fmt.Sprintf("services=%d", tc.n)
		if tc.srv {
			name += "/srv"
		}
		n, srv := tc.n, tc.srv
		b.Run(name, func(b *testing.B) {
			objs := benchServices(n, srv)
			for b.Loop() {
				Build(objs, testOpts)
			}
			b.StopTimer()
			b.ReportMetric(float64(tableBytes(n, srv))/(1<<20), "table-MiB")
			b.ReportMetric(float64(builderBytes(n, srv))/(1<<20), "builder-MiB")
		})
	}
}

// BenchmarkBuildTableKube builds the table of 10,000 Services of
// Kubernetes mode (kubeServices) and reports what the builder keeps per
// Service (issue 50: under 4 KiB of RSS per Service in that mode, of
// which DNS is a part).
func BenchmarkBuildTableKube(b *testing.B) {
	const n = 10_000
	objs := kubeServices(n)
	for b.Loop() {
		Build(objs, testOpts)
	}
	b.StopTimer()
	b.ReportMetric(float64(objectsBuilderBytes(objs))/n, "builder-B/service")
}

// tableBytes is the live heap of a table of n services, including the
// strings it shares with the objects it was built from.
func tableBytes(n int, srv bool) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t := Build(benchServices(n, srv), testOpts)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(t)
	return m1.HeapAlloc - m0.HeapAlloc
}

// builderBytes is the live heap of what the builder keeps for a mesh of n
// services: the view, the index of claims and the services' names.
func builderBytes(n int, srv bool) uint64 {
	return objectsBuilderBytes(benchServices(n, srv))
}

// objectsBuilderBytes is the live heap of what the builder keeps for a
// mesh of the services objs.
func objectsBuilderBytes(objs []*resource.Object) uint64 {
	n := len(objs)
	changes := make(map[resource.Key]*ServiceNames, n)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for _, o := range objs {
		names := Extract(o, testOpts)
		changes[o.Key()] = &names
	}
	ix := newMeshIndex()
	ix.apply(changes)
	changes = nil
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(ix)
	runtime.KeepAlive(objs)
	return m1.HeapAlloc - m0.HeapAlloc
}

// benchQuestions are 1,000 A queries for the names of benchServices, one
// in ten for a name the table does not have.
func benchQuestions() []*dns.Msg {
	qs := make([]*dns.Msg, 1000)
	for i := range qs {
		n := i * 97
		if i%10 == 0 {
			n += 200000 // unknown
		}
		qs[i] = question(fmt.Sprintf("svc-%d.ns-%d.svc.mesh.local.", n, n%100), dns.TypeA)
	}
	return qs
}

// BenchmarkAnswer is the in-process cost of answering one A query (known
// name, 10% unknown) from a table of 100,000 names: the server's work
// without the network.
func BenchmarkAnswer(b *testing.B) {
	s := New(Options{DefaultMesh: "default", Log: discard})
	s.SetTable(Build(benchServices(100000, false), testOpts))
	src := &net.UDPAddr{IP: net.IPv4(10, 9, 9, 9), Port: 5353}
	qs := benchQuestions()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rp := replies.Get().(*answerMem)
		if m := s.answerInto(rp, src, "udp", qs[i%len(qs)]); m == nil {
			b.Fatal("no answer")
		}
		rp.release()
		i++
	}
}

// BenchmarkUpdateOne is the builder's work for one changed service in a
// mesh of 100,000: a new view sharing every untouched shard.
func BenchmarkUpdateOne(b *testing.B) {
	ix := newMeshIndex()
	all := map[resource.Key]*ServiceNames{}
	for _, o := range benchServices(100000, true) {
		n := Extract(o, testOpts)
		all[o.Key()] = &n
	}
	ix.apply(all)
	objs := benchServices(1000, true)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		o := objs[i%len(objs)]
		n := Extract(o, testOpts)
		n.Names[0].Name = fmt.Sprintf("moved-%d-%d.svc.mesh.local.", i%len(objs), i/len(objs)%2) // a renamed service
		ix.apply(map[resource.Key]*ServiceNames{o.Key(): &n})
		i++
	}
}

// BenchmarkNameInBatches is the builder's work while 100,000 services are
// named at a first start: the echoes of the status writes come in batches
// of a few hundred, and each batch makes a new view over the last.
func BenchmarkNameInBatches(b *testing.B) {
	const batch = 500
	objs := benchServices(100000, false)
	changes := make([]map[resource.Key]*ServiceNames, 0, len(objs)/batch)
	for i := 0; i < len(objs); i += batch {
		m := map[resource.Key]*ServiceNames{}
		for _, o := range objs[i:min(i+batch, len(objs))] {
			n := Extract(o, testOpts)
			m[o.Key()] = &n
		}
		changes = append(changes, m)
	}
	b.ReportAllocs()
	for b.Loop() {
		ix := newMeshIndex()
		for _, m := range changes {
			ix.apply(m)
		}
	}
}

// packWriter is a dns.ResponseWriter that packs the reply, as the UDP
// server does, and drops it.
type packWriter struct {
	local, remote net.Addr
	buf           []byte
}

func (w *packWriter) LocalAddr() net.Addr  { return w.local }
func (w *packWriter) RemoteAddr() net.Addr { return w.remote }
func (w *packWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.PackBuffer(w.buf)
	w.buf = b[:0]
	return err
}
func (w *packWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *packWriter) Close() error                { return nil }
func (w *packWriter) TsigStatus() error           { return nil }
func (w *packWriter) TsigTimersOnly(bool)         {}
func (w *packWriter) Hijack()                     {}
func (w *packWriter) Network() string             { return "udp" }

// BenchmarkServeDNS is the whole handler for one A query (10% unknown)
// from a table of 100,000 names: answer, metrics, packing.
func BenchmarkServeDNS(b *testing.B) {
	s := New(Options{DefaultMesh: "default", Log: discard, Registerer: prometheus.NewRegistry()})
	s.SetTable(Build(benchServices(100000, false), testOpts))
	w := &packWriter{local: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5653}, remote: &net.UDPAddr{IP: net.IPv4(10, 9, 9, 9), Port: 5353}}
	qs := benchQuestions()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.ServeDNS(w, qs[i%len(qs)])
		i++
	}
}

// BenchmarkUDPPacket is the UDP path's work for one datagram, without the
// socket: header check, unpacking, answering and packing, from a table of
// 100,000 names (10% unknown).
func BenchmarkUDPPacket(b *testing.B) {
	s := New(Options{DefaultMesh: "default", Log: discard, Registerer: prometheus.NewRegistry()})
	s.SetTable(Build(benchServices(100000, false), testOpts))
	src := &udpSource{ap: netip.MustParseAddrPort("10.9.9.9:5353")}
	var pkts [][]byte
	for _, q := range benchQuestions() {
		p, err := q.Pack()
		if err != nil {
			b.Fatal(err)
		}
		pkts = append(pkts, p)
	}
	req := new(dns.Msg)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rp := replies.Get().(*answerMem)
		m, _ := s.answerPacket(rp, src, pkts[i%len(pkts)], req)
		if _, err := rp.pack(m); err != nil {
			b.Fatal(err)
		}
		rp.release()
		i++
	}
}
