package dnsserver

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// sendRaw sends pkt over UDP to addr and returns the reply, or nil when
// none comes within wait.
func sendRaw(t *testing.T, addr string, pkt []byte, wait time.Duration) *dns.Msg {
	t.Helper()
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(pkt); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, dns.MaxMsgSize)
	n, err := conn.Read(buf)
	if err != nil {
		return nil
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatalf("unpacking a %d-byte reply: %v", n, err)
	}
	return r
}

func packed(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// UDP datagrams are accepted, rejected or ignored as miekg/dns's own server
// does (DefaultMsgAcceptFunc): a response or a runt is never answered.
func TestUDP_AcceptsAsMiekg(t *testing.T) {
	_, addr := startServer(t, Options{DefaultMesh: "default"}, testTable())
	withBits := func(m *dns.Msg, edit func(*dns.Msg)) []byte { edit(m); return packed(t, m) }
	garbage := packed(t, question("frontend.svc.mesh.local.", dns.TypeA))
	garbage = garbage[:len(garbage)-3] // the question cut short
	for _, tc := range []struct {
		name   string
		pkt    []byte
		ignore bool
		rcode  int
		opcode int
	}{
		{name: "query", pkt: packed(t, question("frontend.svc.mesh.local.", dns.TypeA)), rcode: dns.RcodeSuccess},
		{name: "response", pkt: withBits(question("frontend.svc.mesh.local.", dns.TypeA), func(m *dns.Msg) { m.Response = true }), ignore: true},
		{name: "runt", pkt: []byte{0, 1, 0, 0, 0, 1}, ignore: true},
		{name: "two questions", pkt: withBits(question("frontend.svc.mesh.local.", dns.TypeA), func(m *dns.Msg) {
			m.Question = append(m.Question, m.Question[0])
		}), rcode: dns.RcodeFormatError, opcode: dns.OpcodeQuery},
		{name: "update", pkt: withBits(question("mesh.local.", dns.TypeSOA), func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }),
			rcode: dns.RcodeNotImplemented, opcode: dns.OpcodeUpdate},
		{name: "cut short", pkt: garbage, rcode: dns.RcodeFormatError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait := 2 * time.Second
			if tc.ignore {
				wait = 300 * time.Millisecond
			}
			r := sendRaw(t, addr, tc.pkt, wait)
			switch {
			case tc.ignore && r != nil:
				t.Fatalf("answered %v", r)
			case tc.ignore:
				return
			case r == nil:
				t.Fatal("no answer")
			}
			if id := binary.BigEndian.Uint16(tc.pkt); r.Id != id || !r.Response || r.Rcode != tc.rcode || r.Opcode != tc.opcode {
				t.Errorf("answer id %d QR %v rcode %s opcode %d, want id %d QR rcode %s opcode %d",
					r.Id, r.Response, dns.RcodeToString[r.Rcode], r.Opcode, id, dns.RcodeToString[tc.rcode], tc.opcode)
			}
		})
	}
}

// A query an upstream answers slowly leaves the socket's loop: mesh names
// are answered meanwhile, and it gets its answer (here SERVFAIL) later.
func TestUDP_SlowUpstreamDoesNotHoldUpTheSocket(t *testing.T) {
	_, addr := startServer(t, Options{DefaultMesh: "default", Upstreams: []string{deadUpstream(t)}, UpstreamTimeout: time.Second}, testTable())
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fwd := question("example.com.", dns.TypeA)
	if _, err := conn.Write(packed(t, fwd)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the forwarded query is waiting upstream
	start := time.Now()
	r := sendRaw(t, addr, packed(t, question("frontend.svc.mesh.local.", dns.TypeA)), 2*time.Second)
	if r == nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		t.Fatalf("mesh query while another waits upstream: %v", r)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("mesh query answered after %s, behind the upstream's timeout", d)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no answer to the forwarded query: %v", err)
	}
	var got dns.Msg
	if err := got.Unpack(buf[:n]); err != nil || got.Id != fwd.Id || got.Rcode != dns.RcodeServerFailure {
		t.Errorf("forwarded query answered %v (%v), want SERVFAIL for id %d", &got, err, fwd.Id)
	}
}

// FuzzAnswerPacket feeds arbitrary datagrams to the UDP path: no panic;
// a response or a runt is ignored; anything else gets a reply that packs
// within the UDP limit, with the datagram's ID and QR set.
func FuzzAnswerPacket(f *testing.F) {
	addFuzzSeeds(f)
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'w', 'e'})
	s := New(Options{DefaultMesh: "default", Log: discard})
	s.SetTable(testTable())
	src := &udpSource{ap: netip.MustParseAddrPort("10.9.9.9:5353")}
	req := new(dns.Msg)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		rp := new(answerMem)
		m, _ := s.answerPacket(rp, src, pkt, req)
		if len(pkt) < 12 || pkt[2]&0x80 != 0 {
			if m != nil {
				t.Fatalf("answered a runt or a response: %v", m)
			}
			return
		}
		if m == nil {
			return // ignored for another reason miekg/dns's accept function gives
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatalf("reply does not pack: %v\n%v", err, m)
		}
		if len(b) > udpSize {
			t.Fatalf("a %d-byte UDP reply", len(b))
		}
		if m.Id != binary.BigEndian.Uint16(pkt) || !m.Response {
			t.Fatalf("reply id %d QR %v to a datagram with id %d", m.Id, m.Response, binary.BigEndian.Uint16(pkt))
		}
	})
}
