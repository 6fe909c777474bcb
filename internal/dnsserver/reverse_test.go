package dnsserver

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

func TestParseReverse(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // "" when name is not an address
	}{
		{"7.0.0.241.in-addr.arpa.", "241.0.0.7"},
		{"0.0.0.0.in-addr.arpa.", "0.0.0.0"},
		{"255.255.255.255.in-addr.arpa.", "255.255.255.255"},
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", "2001:db8::1"},
		{"f.e.d.c.b.a.9.8.7.6.5.4.3.2.1.0.f.e.d.c.b.a.9.8.7.6.5.4.3.2.1.0.ip6.arpa.", "123:4567:89ab:cdef:123:4567:89ab:cdef"},
		// Partial, non-canonical or malformed reverse names.
		{"0.0.241.in-addr.arpa.", ""},
		{"1.7.0.0.241.in-addr.arpa.", ""},
		{"07.0.0.241.in-addr.arpa.", ""},
		{"256.0.0.241.in-addr.arpa.", ""},
		{"1000.0.0.241.in-addr.arpa.", ""},
		{"a.0.0.241.in-addr.arpa.", ""},
		{".0.0.241.in-addr.arpa.", ""},
		{"7.0.0.241.in-addr.arpa", ""},
		{"in-addr.arpa.", ""},
		{"1.0.ip6.arpa.", ""},
		{"g.e.d.c.b.a.9.8.7.6.5.4.3.2.1.0.f.e.d.c.b.a.9.8.7.6.5.4.3.2.1.0.ip6.arpa.", ""},
		{"ff.d.c.b.a.9.8.7.6.5.4.3.2.1.0.f.e.d.c.b.a.9.8.7.6.5.4.3.2.1.0.ip6.arpa.", ""},
		{"web.mesh.", ""},
	} {
		got, ok := parseReverse(tc.name)
		switch {
		case tc.want == "" && ok:
			t.Errorf("parseReverse(%q) = %s, want no address", tc.name, got)
		case tc.want != "" && (!ok || got != netip.MustParseAddr(tc.want)):
			t.Errorf("parseReverse(%q) = %s, %v, want %s", tc.name, got, ok, tc.want)
		}
	}
}

// Every address's reverse name, as miekg/dns writes it, parses back.
func TestParseReverse_RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		for _, ip := range []netip.Addr{netip.AddrFrom16(b), netip.AddrFrom4([4]byte(b[:4]))} {
			rev, err := dns.ReverseAddr(ip.String())
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := parseReverse(rev); !ok || got != ip {
				t.Fatalf("parseReverse(%q) = %s, %v, want %s", rev, got, ok, ip)
			}
		}
	}
}

func FuzzParseReverse(f *testing.F) {
	f.Add("7.0.0.241.in-addr.arpa.")
	f.Add("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.")
	f.Add("07.0.0.241.in-addr.arpa.")
	f.Fuzz(func(t *testing.T, name string) {
		ip, ok := parseReverse(name)
		if !ok {
			return
		}
		// Only the canonical name of an address is accepted.
		if rev, err := dns.ReverseAddr(ip.String()); err != nil || rev != name {
			t.Fatalf("parseReverse(%q) = %s, whose reverse name is %q", name, ip, rev)
		}
	})
}

func TestSplitFamilies(t *testing.T) {
	a4, b4 := netip.MustParseAddr("241.0.0.1"), netip.MustParseAddr("241.0.0.2")
	a6, b6 := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	for _, tc := range []struct {
		in, v4, v6 []netip.Addr
		shared     bool // the results are sub-slices of in
	}{
		{nil, nil, nil, true},
		{[]netip.Addr{a4}, []netip.Addr{a4}, nil, true},
		{[]netip.Addr{a6}, nil, []netip.Addr{a6}, true},
		{[]netip.Addr{a4, b4, a6, b6}, []netip.Addr{a4, b4}, []netip.Addr{a6, b6}, true},
		{[]netip.Addr{a6, a4, b6, b4}, []netip.Addr{a4, b4}, []netip.Addr{a6, b6}, false},
	} {
		v4, v6 := splitFamilies(tc.in)
		if !slices.Equal(v4, tc.v4) || !slices.Equal(v6, tc.v6) || (v4 == nil) != (tc.v4 == nil) || (v6 == nil) != (tc.v6 == nil) {
			t.Errorf("splitFamilies(%v) = %v, %v, want %v, %v", tc.in, v4, v6, tc.v4, tc.v6)
		}
		if tc.shared && len(v4) > 0 && &v4[0] != &tc.in[0] {
			t.Errorf("splitFamilies(%v) copied addresses already in order", tc.in)
		}
		// Appending to the IPv4 part must never overwrite the IPv6 part.
		if len(v4) > 0 && cap(v4) != len(v4) {
			t.Errorf("splitFamilies(%v): the IPv4 part has spare capacity %d", tc.in, cap(v4)-len(v4))
		}
		if got := v4First(tc.in); !slices.Equal(got, append(slices.Clone(tc.v4), tc.v6...)) {
			t.Errorf("v4First(%v) = %v", tc.in, got)
		}
	}
}
