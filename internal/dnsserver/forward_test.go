package dnsserver

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// TestServer_Forwarding: names outside the zones go to the upstreams.
func TestServer_Forwarding(t *testing.T) {
	up := startUpstream(t)
	dead := deadUpstream(t)
	forwarded := reply{Rcode: "NOERROR", Answer: []string{"example.com. 300 IN A 93.184.216.34"}}
	for _, tc := range []struct {
		name      string
		upstreams []string
		qname     string
		want      reply
		viaUp     bool
	}{
		{"Forwarded", []string{up.addr}, "example.com.", forwarded, true},
		{"ForwardedNXDOMAIN", []string{up.addr}, "nope.example.com.", reply{Rcode: "NXDOMAIN"}, true},
		{"DeadThenLive", []string{dead, up.addr}, "example.com.", forwarded, true},
		{"DeadSERVFAIL", []string{dead}, "example.com.", reply{Rcode: "SERVFAIL"}, false},
		{"NoUpstreamsREFUSED", nil, "example.com.", reply{Rcode: "REFUSED"}, false},
		// Mesh names are never forwarded.
		{"MeshNameNotForwarded", []string{up.addr}, "nope.mesh.local.", reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMeshLocal}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startServer(t, Options{DefaultMesh: "default", Upstreams: tc.upstreams, UpstreamTimeout: 200 * time.Millisecond}, testTable())
			for _, network := range networks {
				before := up.queries.Load()
				q := question(tc.qname, dns.TypeA)
				q.Id = 4242 // a fixed ID, checked by exchange
				r := exchange(t, network, addr, q)
				if diff := cmp.Diff(tc.want, summarize(r)); diff != "" {
					t.Errorf("%s reply (-want +got):\n%s", network, diff)
				}
				if got := up.queries.Load() > before; got != tc.viaUp {
					t.Errorf("%s: upstream queried: %v, want %v", network, got, tc.viaUp)
				}
			}
		})
	}
}

// TestServer_ForwardingSizes: a forwarded answer obeys the same UDP limits
// as our own (the client's buffer, at most 1232 bytes), and a query over
// TCP gets the whole answer even when the upstream truncates over UDP.
func TestServer_ForwardingSizes(t *testing.T) {
	up := startUpstream(t)
	_, addr := startServer(t, Options{DefaultMesh: "default", Upstreams: []string{up.addr}, UpstreamTimeout: 2 * time.Second}, testTable())
	for _, tc := range []struct {
		name  string
		edns  uint16
		limit int
	}{
		{"NoEDNS", 0, 512},
		{"EDNS4096", 4096, 1232},
	} {
		t.Run("UDP"+tc.name, func(t *testing.T) {
			q := question("big.example.com.", dns.TypeA)
			if tc.edns != 0 {
				withEDNS(q, tc.edns)
			}
			raw, r := rawUDP(t, addr, q)
			if len(raw) > tc.limit {
				t.Errorf("forwarded UDP reply of %d bytes, limit %d", len(raw), tc.limit)
			}
			if !r.Truncated {
				t.Errorf("TC not set on a truncated forwarded reply (%d answers)", len(r.Answer))
			}
		})
		t.Run("TCP"+tc.name, func(t *testing.T) {
			q := question("big.example.com.", dns.TypeA)
			if tc.edns != 0 {
				withEDNS(q, tc.edns)
			}
			r := exchange(t, "tcp", addr, q)
			if r.Truncated || len(r.Answer) != 100 {
				t.Errorf("forwarded TCP reply: TC %v, %d answers, want the 100", r.Truncated, len(r.Answer))
			}
		})
	}
}
