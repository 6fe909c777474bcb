package dnsserver

import (
	"net"
	"testing"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/resource"
)

// fuzzAddr is the source of fuzzed queries.
type fuzzAddr struct{ network, addr string }

func (a fuzzAddr) Network() string { return a.network }
func (a fuzzAddr) String() string  { return a.addr }

// fuzzSeeds are real queries: every type the server answers, EDNS, two
// questions, another class, another opcode.
func fuzzSeeds() []*dns.Msg {
	var out []*dns.Msg
	add := func(name string, qtype uint16, edit ...func(*dns.Msg)) {
		m := question(name, qtype)
		for _, e := range edit {
			e(m)
		}
		out = append(out, m)
	}
	edns := func(size uint16) func(*dns.Msg) { return func(m *dns.Msg) { m.SetEdns0(size, true) } }
	add("frontend.svc.mesh.local.", dns.TypeA)
	add("FrontEnd.Svc.Mesh.Local.", dns.TypeAAAA)
	add("_http._tcp.frontend.svc.mesh.local.", dns.TypeSRV)
	add("1.0.0.241.in-addr.arpa.", dns.TypePTR)
	add("frontend.svc.mesh.local.", dns.TypeANY)
	add("frontend_default_svc_80.mesh.", dns.TypeA, edns(4096))
	add("big.svc.mesh.local.", dns.TypeA)
	add("big.svc.mesh.local.", dns.TypeA, edns(700))
	add("nope.mesh.", dns.TypeA, edns(1232))
	add("mesh.local.", dns.TypeSOA)
	add("mesh.", dns.TypeNS)
	add("example.com.", dns.TypeA)
	add("frontend.svc.mesh.local.", dns.TypeA, edns(1232), func(m *dns.Msg) { m.IsEdns0().SetVersion(1) })
	add("frontend.svc.mesh.local.", dns.TypeA, func(m *dns.Msg) {
		m.Question = append(m.Question, dns.Question{Name: "mesh.", Qtype: dns.TypeNS, Qclass: dns.ClassINET})
	})
	add("version.bind.", dns.TypeTXT, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS })
	add("mesh.local.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify })
	add("frontend.svc.mesh.local.", dns.TypeA, func(m *dns.Msg) { m.Response = true })
	return out
}

// addFuzzSeeds adds the packed fuzzSeeds to f's corpus.
func addFuzzSeeds(f *testing.F) {
	for _, m := range fuzzSeeds() {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzServeDNS feeds arbitrary bytes to the query path: whatever unpacks
// as a message is answered, over UDP and TCP, from a Dataplane's address
// and from another one, by servers with and without a default mesh. Every
// reply must pack, carry the query's ID and QR, and over UDP fit the
// client's buffer (512 bytes without EDNS, else its size, at most 1232).
func FuzzServeDNS(f *testing.F) {
	addFuzzSeeds(f)
	tbl := testTable(dataplane("b", "dp-b", 0, "10.0.0.1"),
		svc(resource.MeshService, "b", "long", 0, vips(bigVIPs()...), hosts("a-rather-long-name-to-fill-the-answer-section.svc.mesh.local")))
	var servers []*Server
	for _, def := range []string{"default", ""} {
		s := New(Options{DefaultMesh: def, Log: discard})
		s.SetTable(tbl)
		servers = append(servers, s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, s := range servers {
			for _, network := range networks {
				for _, src := range []string{"10.0.0.1:5353", "[fd00::9]:5353"} {
					r := new(dns.Msg)
					if err := r.Unpack(data); err != nil {
						return
					}
					checkReply(t, r, s.answer(fuzzAddr{network, src}, network, r), network)
				}
			}
		}
	})
}

func checkReply(t *testing.T, r, m *dns.Msg, network string) {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatalf("reply does not pack: %v\nquery: %v\nreply: %v", err, r, m)
	}
	if m.Id != r.Id {
		t.Errorf("reply ID %d, query ID %d", m.Id, r.Id)
	}
	if !m.Response {
		t.Error("reply without QR")
	}
	if err := new(dns.Msg).Unpack(b); err != nil {
		t.Errorf("reply does not unpack: %v", err)
	}
	if network == "udp" {
		limit := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil {
			limit = min(max(int(opt.UDPSize()), dns.MinMsgSize), udpSize)
		}
		if len(b) > limit {
			t.Errorf("UDP reply of %d bytes, limit %d\nquery: %v", len(b), limit, r)
		}
	}
}

// TestFuzzSeeds runs the fuzz seeds through the checks with a real
// net.Addr, so that a plain `go test` covers them too.
func TestFuzzSeeds(t *testing.T) {
	s := New(Options{DefaultMesh: "default", Log: discard})
	s.SetTable(testTable())
	for _, q := range fuzzSeeds() {
		for _, network := range networks {
			checkReply(t, q, s.answer(&net.UDPAddr{IP: net.IPv4(10, 9, 9, 9), Port: 5353}, network, q), network)
		}
	}
}
