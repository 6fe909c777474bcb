package dnsserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/resource"
)

// Tests with real queries: a miekg/dns client over UDP and TCP against a
// Server started with Run on a free loopback port. Queries come from
// 127.0.0.1, which the per-mesh view tests use as a Dataplane address.

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

var networks = []string{"udp", "tcp"}

// startServer runs a server on 127.0.0.1:0 answering from tbl and returns
// it with its address; it stops at the end of the test.
func startServer(t *testing.T, o Options, tbl *Table) (*Server, string) {
	t.Helper()
	o.Addr = "127.0.0.1:0"
	if o.Log == nil {
		o.Log = discard
	}
	s := New(o)
	if tbl != nil {
		s.SetTable(tbl)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	addr, err := s.Addr(actx)
	if err != nil {
		t.Fatalf("Addr: %v", err)
	}
	return s, addr
}

// exchange sends m over network and returns the reply. The UDP client
// reads datagrams of any size, so that an oversized reply is seen as such.
func exchange(t *testing.T, network, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: dns.MaxMsgSize}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s query %v: %v", network, m.Question, err)
	}
	if r.Id != m.Id {
		t.Errorf("reply ID %d, want %d", r.Id, m.Id)
	}
	if !r.Response {
		t.Error("reply without QR")
	}
	return r
}

// rawUDP sends m over UDP and returns the datagram of the reply as sent.
func rawUDP(t *testing.T, addr string, m *dns.Msg) ([]byte, *dns.Msg) {
	t.Helper()
	q, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(q); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, dns.MaxMsgSize)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatalf("unpacking a %d-byte reply: %v", n, err)
	}
	if r.Id != m.Id {
		t.Errorf("reply ID %d, want %d", r.Id, m.Id)
	}
	return buf[:n], r
}

func question(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

func withEDNS(m *dns.Msg, size uint16) *dns.Msg {
	m.SetEdns0(size, false)
	return m
}

// reply is the part of a response the tests compare.
type reply struct {
	Rcode  string
	AA, TC bool
	Answer []string
	Ns     []string
}

func summarize(m *dns.Msg) reply {
	r := reply{Rcode: dns.RcodeToString[m.Rcode], AA: m.Authoritative, TC: m.Truncated}
	for _, rr := range m.Answer {
		r.Answer = append(r.Answer, strings.Join(strings.Fields(rr.String()), " "))
	}
	for _, rr := range m.Ns {
		r.Ns = append(r.Ns, strings.Join(strings.Fields(rr.String()), " "))
	}
	return r
}

const (
	soaMeshLocal = "mesh.local. 10 IN SOA ns.mesh.local. hostmaster.mesh.local. 1 3600 600 86400 10"
	soaMesh      = "mesh. 10 IN SOA ns.mesh. hostmaster.mesh. 1 3600 600 86400 10"
)

// bigVIPs are the 100 VIPs of big.svc.mesh.local (truncation).
func bigVIPs() []string {
	var out []string
	for i := 1; i <= 100; i++ {
		out = append(out, fmt.Sprintf("241.1.0.%d", i))
	}
	return out
}

// testObjects is a small realistic mesh "default" and a mesh "b" with the
// same name on another VIP.
func testObjects() []*resource.Object {
	return []*resource.Object{
		svc(resource.MeshService, "default", "frontend", 0, vips("241.0.0.1", "fd00:241::1"), ports("http:80", "8080"),
			hosts("frontend.svc.mesh.local"), tags("frontend_default_svc_80"), lost("frontend-default-svc-80.mesh")),
		svc(resource.MeshService, "default", "v4only", 1, vips("241.0.0.2"), hosts("v4only.svc.mesh.local")),
		// Holds frontend's dash alias as its generated hostname (the
		// hostnames controller gave it to squatter).
		svc(resource.MeshService, "default", "squatter", 2, vips("241.0.0.4"), hosts("frontend-default-svc-80.mesh")),
		svc(resource.MeshService, "default", "big", 3, vips(bigVIPs()...), hosts("big.svc.mesh.local")),
		svc(resource.MeshService, "default", "web", 4, vips("241.0.0.5"), hosts("web.svc.mesh.local")),
		svc(resource.MeshExternalService, "default", "httpbin", 5, internalVIP("httpbin.org", "242.0.0.1")),
		svc(resource.MeshService, "b", "web", 0, vips("241.0.0.7"), hosts("web.svc.mesh.local")),
	}
}

func testTable(extra ...*resource.Object) *Table {
	return Build(append(testObjects(), extra...), testOpts)
}

// TestServer_Records queries every record type and answer shape over UDP
// and TCP.
func TestServer_Records(t *testing.T) {
	_, addr := startServer(t, Options{DefaultMesh: "default"}, testTable())
	for _, tc := range []struct {
		name  string
		qname string
		qtype uint16
		want  reply
	}{
		{"A", "frontend.svc.mesh.local.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"frontend.svc.mesh.local. 10 IN A 241.0.0.1"}}},
		{"AAAA", "frontend.svc.mesh.local.", dns.TypeAAAA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"frontend.svc.mesh.local. 10 IN AAAA fd00:241::1"}}},
		{"SRV", "_http._tcp.frontend.svc.mesh.local.", dns.TypeSRV,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"_http._tcp.frontend.svc.mesh.local. 10 IN SRV 0 0 80 frontend.svc.mesh.local."}}},
		{"PTRv4", "1.0.0.241.in-addr.arpa.", dns.TypePTR,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"1.0.0.241.in-addr.arpa. 10 IN PTR frontend.svc.mesh.local."}}},
		{"PTRv6", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.4.2.0.0.0.d.f.ip6.arpa.", dns.TypePTR,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.4.2.0.0.0.d.f.ip6.arpa. 10 IN PTR frontend.svc.mesh.local."}}},
		{"PTRUpperCase", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.4.2.0.0.0.D.F.IP6.ARPA.", dns.TypePTR,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.4.2.0.0.0.D.F.IP6.ARPA. 10 IN PTR frontend.svc.mesh.local."}}},
		{"NXDOMAIN", "nope.svc.mesh.local.", dns.TypeA,
			reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMeshLocal}}},
		{"NXDOMAINOtherZone", "nope.mesh.", dns.TypeAAAA,
			reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMesh}}},
		{"NXDOMAINSRVOfUnnamedPort", "_8080._tcp.frontend.svc.mesh.local.", dns.TypeSRV,
			reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMeshLocal}}},
		{"NODATAAAAAOfV4Only", "v4only.svc.mesh.local.", dns.TypeAAAA,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{soaMeshLocal}}},
		{"NODATATXT", "frontend.svc.mesh.local.", dns.TypeTXT,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{soaMeshLocal}}},
		{"NODATAAOfSRVName", "_http._tcp.frontend.svc.mesh.local.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{soaMeshLocal}}},
		{"NODATASRVOfName", "frontend.svc.mesh.local.", dns.TypeSRV,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{soaMeshLocal}}},
		// Empty non-terminals exist (names below them do): NODATA, not
		// NXDOMAIN, which a resolver would take for "nothing below"
		// (RFC 8020) and which stops QNAME minimisation (RFC 9156).
		{"EmptyNonTerminal", "svc.mesh.local.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{soaMeshLocal}}},
		{"EmptyNonTerminalCase", "SVC.Mesh.Local.", dns.TypeNS,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{soaMeshLocal}}},
		{"EmptyNonTerminalOfSRV", "_tcp.frontend.svc.mesh.local.", dns.TypeSRV,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{soaMeshLocal}}},
		{"EmptyNonTerminalOfAlias", "default.svc.80.mesh.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{soaMesh}}},
		{"BelowAName", "x.frontend.svc.mesh.local.", dns.TypeA,
			reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMeshLocal}}},
		// Outside the zones, the parents of InternalVIP values are not ours.
		{"ParentOutsideZonesNotAnswered", "org.", dns.TypeA, reply{Rcode: "REFUSED"}},
		{"ApexSOA", "mesh.local.", dns.TypeSOA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{soaMeshLocal}}},
		{"ApexNS", "mesh.", dns.TypeNS,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"mesh. 10 IN NS ns.mesh."}}},
		{"ApexA", "Mesh.Local.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{soaMeshLocal}}},
		{"ApexSOAEchoesCase", "MESH.", dns.TypeSOA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"MESH. 10 IN SOA ns.mesh. hostmaster.mesh. 1 3600 600 86400 10"}}},
		{"ANYMinimal", "frontend.svc.mesh.local.", dns.TypeANY,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{`frontend.svc.mesh.local. 10 IN HINFO "RFC8482" ""`}}},
		{"ANYUnknown", "nope.mesh.local.", dns.TypeANY,
			reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMeshLocal}}},
		{"CaseInsensitiveEchoesCase", "FrOnTeNd.SvC.MeSh.LoCaL.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"FrOnTeNd.SvC.MeSh.LoCaL. 10 IN A 241.0.0.1"}}},
		{"CaseInsensitiveSRV", "_HTTP._TCP.Frontend.Svc.Mesh.Local.", dns.TypeSRV,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"_HTTP._TCP.Frontend.Svc.Mesh.Local. 10 IN SRV 0 0 80 frontend.svc.mesh.local."}}},
		// Seed 004: the tag and its aliases on the service's VIP.
		{"ServiceTag", "frontend_default_svc_80.mesh.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"frontend_default_svc_80.mesh. 10 IN A 241.0.0.1"}}},
		{"ServiceTagAAAA", "frontend_default_svc_80.mesh.", dns.TypeAAAA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"frontend_default_svc_80.mesh. 10 IN AAAA fd00:241::1"}}},
		{"ServiceTagSRV", "_http._tcp.frontend_default_svc_80.mesh.", dns.TypeSRV,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"_http._tcp.frontend_default_svc_80.mesh. 10 IN SRV 0 0 80 frontend_default_svc_80.mesh."}}},
		{"DotAlias", "frontend.default.svc.80.mesh.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"frontend.default.svc.80.mesh. 10 IN A 241.0.0.1"}}},
		{"DotAliasCase", "Frontend.Default.Svc.80.Mesh.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"Frontend.Default.Svc.80.Mesh. 10 IN A 241.0.0.1"}}},
		{"NoSRVForAlias", "_http._tcp.frontend.default.svc.80.mesh.", dns.TypeSRV,
			reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMesh}}},
		// The dash alias collides with squatter's hostname: squatter's VIP.
		{"CollidingAliasAnswersHolder", "frontend-default-svc-80.mesh.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"frontend-default-svc-80.mesh. 10 IN A 241.0.0.4"}}},
		// An InternalVIP value outside the zones is answered from the table.
		{"InternalVIP", "HTTPBIN.org.", dns.TypeA,
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"HTTPBIN.org. 10 IN A 242.0.0.1"}}},
		{"InternalVIPNODATA", "httpbin.org.", dns.TypeAAAA,
			reply{Rcode: "NOERROR", AA: true, Ns: []string{"httpbin.org. 10 IN SOA ns.httpbin.org. hostmaster.httpbin.org. 1 3600 600 86400 10"}}},
	} {
		for _, network := range networks {
			t.Run(tc.name+"/"+network, func(t *testing.T) {
				q := question(tc.qname, tc.qtype)
				r := exchange(t, network, addr, q)
				if diff := cmp.Diff(tc.want, summarize(r)); diff != "" {
					t.Errorf("reply (-want +got):\n%s", diff)
				}
				if len(r.Question) != 1 || r.Question[0] != q.Question[0] {
					t.Errorf("question %v, want %v", r.Question, q.Question)
				}
				if r.RecursionAvailable {
					t.Error("RA set: no recursion for mesh names")
				}
			})
		}
	}
}

// TestServer_Rcodes checks the malformed and unsupported queries.
func TestServer_Rcodes(t *testing.T) {
	_, addr := startServer(t, Options{DefaultMesh: "default"}, testTable())
	two := question("frontend.svc.mesh.local.", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "v4only.svc.mesh.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	none := question("frontend.svc.mesh.local.", dns.TypeA)
	none.Question = nil
	status := question("frontend.svc.mesh.local.", dns.TypeA)
	status.Opcode = dns.OpcodeStatus
	notify := question("mesh.local.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	chaos := question("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	for _, tc := range []struct {
		name  string
		q     *dns.Msg
		rcode int
	}{
		{"FORMERRNoQuestion", none, dns.RcodeFormatError},
		{"FORMERRTwoQuestions", two, dns.RcodeFormatError},
		{"NOTIMPOpcodeStatus", status, dns.RcodeNotImplemented},
		{"NOTIMPOpcodeNotify", notify, dns.RcodeNotImplemented},
		{"NOTIMPClassCHAOS", chaos, dns.RcodeNotImplemented},
	} {
		for _, network := range networks {
			t.Run(tc.name+"/"+network, func(t *testing.T) {
				r := exchange(t, network, addr, tc.q)
				if r.Rcode != tc.rcode {
					t.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
				}
				if len(r.Answer) != 0 {
					t.Errorf("answers %v", r.Answer)
				}
			})
		}
	}
	// The library rejects 0 and 2 questions before the handler; the
	// handler's own checks answer the same.
	s := New(Options{DefaultMesh: "default", Log: discard})
	s.SetTable(testTable())
	for _, q := range []*dns.Msg{none, two} {
		if r := s.answer(&net.UDPAddr{IP: net.IPv4(10, 9, 9, 9), Port: 5353}, "udp", q); r.Rcode != dns.RcodeFormatError {
			t.Errorf("handler: %d questions: rcode %s, want FORMERR", len(q.Question), dns.RcodeToString[r.Rcode])
		}
	}
}

// TestServer_EDNS checks BADVERS and the OPT record of replies.
func TestServer_EDNS(t *testing.T) {
	_, addr := startServer(t, Options{DefaultMesh: "default"}, testTable())
	for _, network := range networks {
		t.Run("BADVERS/"+network, func(t *testing.T) {
			q := withEDNS(question("frontend.svc.mesh.local.", dns.TypeA), 1232)
			q.IsEdns0().SetVersion(1)
			r := exchange(t, network, addr, q)
			if r.Rcode != dns.RcodeBadVers {
				t.Errorf("rcode %s, want BADVERS", dns.RcodeToString[r.Rcode])
			}
			opt := r.IsEdns0()
			if opt == nil || opt.Version() != 0 {
				t.Errorf("reply OPT %v, want version 0", opt)
			}
			if len(r.Answer) != 0 {
				t.Errorf("answers %v", r.Answer)
			}
		})
		t.Run("OPT/"+network, func(t *testing.T) {
			r := exchange(t, network, addr, withEDNS(question("frontend.svc.mesh.local.", dns.TypeA), 4096))
			opt := r.IsEdns0()
			if opt == nil || opt.UDPSize() != udpSize {
				t.Errorf("reply OPT %v, want UDP size %d", opt, udpSize)
			}
			if len(r.Answer) != 1 || r.Truncated {
				t.Errorf("reply %v", summarize(r))
			}
		})
		t.Run("NoOPTWithoutEDNS/"+network, func(t *testing.T) {
			if r := exchange(t, network, addr, question("frontend.svc.mesh.local.", dns.TypeA)); r.IsEdns0() != nil {
				t.Errorf("OPT in a reply to a query without one: %v", r.IsEdns0())
			}
		})
	}
}

// TestServer_Truncation: 100 A records do not fit in a UDP reply; the
// reply fits the client's buffer (512 bytes without EDNS, the advertised
// size up to 1232 with it) and has TC set; over TCP the whole answer comes.
func TestServer_Truncation(t *testing.T) {
	_, addr := startServer(t, Options{DefaultMesh: "default"}, testTable())
	for _, tc := range []struct {
		name  string
		edns  uint16 // 0: no EDNS
		limit int
	}{
		{"NoEDNS", 0, 512},
		{"EDNSBelowMinimum", 256, 512},
		{"EDNS700", 700, 700},
		{"EDNS1232", 1232, 1232},
		{"EDNS4096CappedAt1232", 4096, 1232},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := question("big.svc.mesh.local.", dns.TypeA)
			if tc.edns != 0 {
				withEDNS(q, tc.edns)
			}
			raw, r := rawUDP(t, addr, q)
			if len(raw) > tc.limit {
				t.Errorf("UDP reply of %d bytes, limit %d", len(raw), tc.limit)
			}
			if !r.Truncated {
				t.Error("TC not set")
			}
			if len(r.Answer) == 0 || len(r.Answer) >= 100 {
				t.Errorf("%d answers in a truncated reply", len(r.Answer))
			}
			if len(raw) < tc.limit-64 {
				t.Errorf("UDP reply of %d bytes: the truncated reply should fill most of the %d bytes", len(raw), tc.limit)
			}
			if (tc.edns != 0) != (r.IsEdns0() != nil) {
				t.Errorf("OPT in reply: %v, query had EDNS: %v", r.IsEdns0(), tc.edns != 0)
			}
		})
	}
	t.Run("SmallAnswerNotTruncated", func(t *testing.T) {
		raw, r := rawUDP(t, addr, question("frontend.svc.mesh.local.", dns.TypeA))
		if r.Truncated || len(r.Answer) != 1 || len(raw) > 512 {
			t.Errorf("%d bytes: %v", len(raw), summarize(r))
		}
	})
	t.Run("TCPFullAnswer", func(t *testing.T) {
		r := exchange(t, "tcp", addr, question("big.svc.mesh.local.", dns.TypeA))
		if r.Truncated {
			t.Error("TC set over TCP")
		}
		got := map[string]bool{}
		for _, rr := range r.Answer {
			got[rr.(*dns.A).A.String()] = true
		}
		for _, ip := range bigVIPs() {
			if !got[ip] {
				t.Errorf("TCP answer misses %s", ip)
			}
		}
		if len(r.Answer) != 100 {
			t.Errorf("%d answers over TCP, want 100", len(r.Answer))
		}
	})
}

// TestServer_MeshViews: the same name in two meshes; a query is answered
// from the mesh of the Dataplane at its source (127.0.0.1), else from the
// default mesh, else refused.
func TestServer_MeshViews(t *testing.T) {
	dpB := dataplane("b", "dp-b", 0, "127.0.0.1")
	dpC := dataplane("c", "dp-c", 0, "127.0.0.1") // a mesh with no services
	dpElsewhere := dataplane("b", "dp-far", 0, "10.0.0.1")
	for _, tc := range []struct {
		name        string
		defaultMesh string
		extra       []*resource.Object
		qname       string
		want        reply
	}{
		{"DataplaneInB", "default", []*resource.Object{dpB}, "web.svc.mesh.local.",
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"web.svc.mesh.local. 10 IN A 241.0.0.7"}}},
		{"DataplaneInBDefaultEmpty", "", []*resource.Object{dpB}, "web.svc.mesh.local.",
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"web.svc.mesh.local. 10 IN A 241.0.0.7"}}},
		// b's view does not have default's names.
		{"DataplaneInBOtherMeshName", "default", []*resource.Object{dpB}, "frontend.svc.mesh.local.",
			reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMeshLocal}}},
		{"NoDataplaneDefaultMesh", "default", []*resource.Object{dpElsewhere}, "web.svc.mesh.local.",
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"web.svc.mesh.local. 10 IN A 241.0.0.5"}}},
		{"NoDataplaneDefaultMeshB", "b", nil, "web.svc.mesh.local.",
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"web.svc.mesh.local. 10 IN A 241.0.0.7"}}},
		{"NoDataplaneNoDefaultRefused", "", []*resource.Object{dpElsewhere}, "web.svc.mesh.local.",
			reply{Rcode: "REFUSED"}},
		{"NoDataplaneNoDefaultRefusedUnknown", "", nil, "nope.mesh.",
			reply{Rcode: "REFUSED"}},
		{"NoDataplaneNoDefaultRefusedPTR", "", nil, "7.0.0.241.in-addr.arpa.",
			reply{Rcode: "REFUSED"}},
		// A mesh with a Dataplane and no services: its view is empty.
		{"DataplaneInMeshWithoutServices", "default", []*resource.Object{dpC}, "web.svc.mesh.local.",
			reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMeshLocal}}},
		{"DataplaneInBPTR", "default", []*resource.Object{dpB}, "7.0.0.241.in-addr.arpa.",
			reply{Rcode: "NOERROR", AA: true, Answer: []string{"7.0.0.241.in-addr.arpa. 10 IN PTR web.svc.mesh.local."}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startServer(t, Options{DefaultMesh: tc.defaultMesh}, testTable(tc.extra...))
			qtype := dns.TypeA
			if strings.HasSuffix(tc.qname, ".arpa.") {
				qtype = dns.TypePTR
			}
			for _, network := range networks {
				r := exchange(t, network, addr, question(tc.qname, qtype))
				if diff := cmp.Diff(tc.want, summarize(r)); diff != "" {
					t.Errorf("%s reply (-want +got):\n%s", network, diff)
				}
			}
		})
	}
}

// TestServer_SetTable: before the first table every query is SERVFAIL (an
// NXDOMAIN would be cached for names that exist, a forwarded query would
// reach an upstream that does not know them); a new table is answered
// from at once.
func TestServer_SetTable(t *testing.T) {
	up := startUpstream(t)
	s, addr := startServer(t, Options{DefaultMesh: "default", Upstreams: []string{up.addr}, UpstreamTimeout: time.Second}, nil)
	if s.Table() != nil {
		t.Error("a table before the first SetTable")
	}
	for _, name := range []string{"web.svc.mesh.local.", "example.com."} {
		for _, network := range networks {
			if r := exchange(t, network, addr, question(name, dns.TypeA)); r.Rcode != dns.RcodeServerFailure || len(r.Answer) > 0 {
				t.Errorf("before SetTable, %s over %s: %v", name, network, summarize(r))
			}
		}
	}
	if n := up.queries.Load(); n != 0 {
		t.Errorf("%d queries forwarded before the first table", n)
	}
	tbl := testTable()
	s.SetTable(tbl)
	if s.Table() != tbl {
		t.Error("Table does not return the table set")
	}
	if r := exchange(t, "udp", addr, question("web.svc.mesh.local.", dns.TypeA)); len(r.Answer) != 1 {
		t.Errorf("after SetTable: %v", summarize(r))
	}
}

// upstream is a fake recursive server: it answers example.com A with
// 93.184.216.34 and big.example.com A with 100 records, truncating UDP
// replies to the query's buffer size as real servers do.
type upstream struct {
	addr    string
	queries atomic.Int64
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		q := r.Question[0]
		switch {
		case strings.EqualFold(q.Name, "example.com.") && q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP("93.184.216.34")}}
		case strings.EqualFold(q.Name, "big.example.com.") && q.Qtype == dns.TypeA:
			for i := 1; i <= 100; i++ {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(198, 51, 100, byte(i))})
			}
		default:
			m.Rcode = dns.RcodeNameError
		}
		size := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil {
			m.SetEdns0(4096, false)
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		if w.LocalAddr().Network() == "udp" {
			m.Truncate(size)
		}
		_ = w.WriteMsg(m)
	})
	// listen retries when the UDP port it got is taken for TCP.
	pcs, ln, err := listen("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	pc := pcs[0]
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		go func() { _ = srv.ActivateAndServe() }()
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	u.addr = pc.LocalAddr().String()
	return u
}

// deadUpstream is a UDP port nobody reads.
func deadUpstream(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

// Answers built in reused memory are byte for byte those built in fresh
// memory, whatever the previous query left behind: more addresses than
// the pooled records, both families, SRV, NXDOMAIN, EDNS0, bad versions.
func TestServeDNS_ReusedMemoryMatchesFresh(t *testing.T) {
	var many4, many6 []string
	for i := range 6 {
		many4 = append(many4, fmt.Sprintf("241.0.1.%d", i+1))
		many6 = append(many6, fmt.Sprintf("fd00::%d", i+1))
	}
	big := svc(resource.MeshService, "default", "big", 0, vips(append(many4, many6...)...), hosts("big.mesh.local"))
	big.Spec = &resource.MeshServiceSpec{Ports: []resource.Port{{Name: "http", Port: 80, AppProtocol: "http"}}}
	s := New(Options{DefaultMesh: "default", Log: discard, Registerer: prometheus.NewRegistry()})
	s.SetTable(Build([]*resource.Object{
		big,
		svc(resource.MeshService, "default", "one", 1, vips("241.0.0.7"), hosts("one.mesh.local")),
		svc(resource.MeshService, "default", "six", 2, vips("fd00::7"), hosts("six.mesh.local")),
	}, testOpts))
	w := &captureWriter{packWriter: packWriter{local: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5653}, remote: &net.UDPAddr{IP: net.IPv4(10, 9, 9, 9), Port: 5353}}}

	var qs []*dns.Msg
	for _, name := range []string{"big.mesh.local.", "ONE.mesh.local.", "six.mesh.local.", "none.mesh.local.", "_http._tcp.big.mesh.local.", "7.0.0.241.in-addr.arpa.", "mesh.local."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeANY, dns.TypeSOA} {
			qs = append(qs, question(name, qt))
			e := question(name, qt)
			e.SetEdns0(4096, false)
			qs = append(qs, e)
		}
	}
	bad := question("big.mesh.local.", dns.TypeA)
	bad.SetEdns0(4096, false)
	bad.IsEdns0().SetVersion(1)
	qs = append(qs, bad)

	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		q := qs[r.IntN(len(qs))]
		q.Id = uint16(i)
		s.ServeDNS(w, q)
		want, err := s.answer(w.remote, "udp", q).Pack()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.out, want) {
			var got dns.Msg
			_ = got.Unpack(w.out)
			t.Fatalf("query %d (%s): served\n%v\nwant\n%v", i, q.Question[0].String(), &got, s.answer(w.remote, "udp", q))
		}
	}
}
