package extsvc

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go4.org/netipx"
)

// ranges builds Service.Ranges from "port prefix-or-IP" pairs.
func ranges(pairs ...any) map[int][]netip.Prefix {
	out := map[int][]netip.Prefix{}
	for i := 0; i+1 < len(pairs); i += 2 {
		port, s := pairs[i].(int), pairs[i+1].(string)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a := netip.MustParseAddr(s)
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out[port] = append(out[port], p)
	}
	return out
}

func es(name string, pairs ...any) Service {
	return Service{Key: Key{"default", name}, Ranges: ranges(pairs...)}
}

// withDomains adds Domain matches to s from "port domain" pairs.
func withDomains(s Service, pairs ...any) Service {
	s.Domains = map[int][]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		s.Domains[pairs[i].(int)] = append(s.Domains[pairs[i].(int)], pairs[i+1].(string))
	}
	return s
}

func TestEngine_Overlaps(t *testing.T) {
	tests := []struct {
		name string
		svcs []Service
		// want are the overlaps of "a"; "b" must see the mirror image.
		want []Overlap
	}{
		{"IPInCIDR", []Service{es("a", 80, "10.1.1.7"), es("b", 80, "10.1.1.0/24")},
			[]Overlap{{Other: "b", Ports: []int{80}, IPs: []string{"10.1.1.7"}}}},
		{"CIDRInCIDR", []Service{es("a", 443, "10.0.0.0/8"), es("b", 443, "10.1.1.0/24")},
			[]Overlap{{Other: "b", Ports: []int{443}, IPs: []string{"10.1.1.0/24"}}}},
		{"SameIP", []Service{es("a", 80, "192.168.0.1"), es("b", 80, "192.168.0.1")},
			[]Overlap{{Other: "b", Ports: []int{80}, IPs: []string{"192.168.0.1"}}}},
		{"Disjoint", []Service{es("a", 80, "10.1.1.0/24"), es("b", 80, "10.1.2.0/24", 80, "10.1.0.255")}, nil},
		{"Adjacent", []Service{es("a", 80, "10.1.0.0/24"), es("b", 80, "10.1.1.0/24")}, nil},
		{"DifferentPorts", []Service{es("a", 80, "10.1.1.0/24"), es("b", 443, "10.1.1.0/24")}, nil},
		{"IPv6InCIDR", []Service{es("a", 443, "2001:db8::/32"), es("b", 443, "2001:db8:1::5")},
			[]Overlap{{Other: "b", Ports: []int{443}, IPs: []string{"2001:db8:1::5"}}}},
		{"IPv6CIDRInCIDR", []Service{es("a", 443, "2001:db8:1::/48"), es("b", 443, "2001:db8::/32")},
			[]Overlap{{Other: "b", Ports: []int{443}, IPs: []string{"2001:db8:1::/48"}}}},
		{"IPv4AndIPv6NeverOverlap", []Service{es("a", 80, "0.0.0.0/0"), es("b", 80, "::/0")}, nil},
		// An IPv4-mapped IPv6 address is the IPv4 address on the wire.
		{"IPv4MappedIsIPv4", []Service{es("a", 80, "::ffff:10.1.1.7"), es("b", 80, "10.1.1.0/24")},
			[]Overlap{{Other: "b", Ports: []int{80}, IPs: []string{"10.1.1.7"}}}},
		{"SeveralPortsAndRanges", []Service{
			es("a", 80, "10.0.0.0/16", 443, "10.0.0.0/16", 8080, "172.16.0.1"),
			es("b", 80, "10.0.1.0/24", 80, "10.0.3.3", 443, "10.0.2.0/24", 8080, "172.16.0.2"),
		}, []Overlap{{Other: "b", Ports: []int{80, 443}, IPs: []string{"10.0.1.0/24", "10.0.2.0/24", "10.0.3.3"}}}},
		// A service's own ranges may overlap; that is not reported.
		{"OwnRangesIgnored", []Service{es("a", 80, "10.0.0.0/8", 80, "10.1.1.1")}, []Overlap{}},
		{"SameDomain", []Service{withDomains(es("a"), 443, "httpbin.org"), withDomains(es("b"), 443, "HTTPBIN.org", 443, "other.org")},
			[]Overlap{{Other: "b", Ports: []int{443}, Domains: []string{"httpbin.org"}}}},
		{"DomainOnAnotherPort", []Service{withDomains(es("a"), 443, "httpbin.org"), withDomains(es("b"), 80, "httpbin.org")}, nil},
		// A wildcard and a name it covers are not the same: the proxy
		// takes the exact name first.
		{"WildcardIsNotTheName", []Service{withDomains(es("a"), 443, "*.example.com"), withDomains(es("b"), 443, "api.example.com")}, nil},
		{"DomainsAndIPs", []Service{withDomains(es("a", 80, "10.0.0.0/8"), 80, "x.com", 443, "y.com"), withDomains(es("b", 80, "10.1.1.1"), 443, "y.com", 443, "x.com")},
			[]Overlap{{Other: "b", Ports: []int{80, 443}, IPs: []string{"10.1.1.1"}, Domains: []string{"y.com"}}}},
		{"Three", []Service{es("a", 80, "10.0.0.0/8"), es("c", 80, "10.2.0.0/16"), es("b", 80, "10.1.0.0/16"), es("d", 80, "11.0.0.0/8")},
			[]Overlap{{Other: "b", Ports: []int{80}, IPs: []string{"10.1.0.0/16"}}, {Other: "c", Ports: []int{80}, IPs: []string{"10.2.0.0/16"}}}},
	}
	for _, tt := range tests {
		for _, how := range []string{"Set", "Load"} {
			t.Run(tt.name+"/"+how, func(t *testing.T) {
				e := NewEngine()
				if how == "Load" {
					e.Load(tt.svcs)
				} else {
					for _, s := range tt.svcs {
						e.Set(s)
					}
				}
				got := e.Overlaps(Key{"default", "a"})
				if d := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); d != "" {
					t.Errorf("overlaps of a (-want +got):\n%s", d)
				}
				for _, o := range tt.want {
					back := e.Overlaps(Key{"default", o.Other})
					i := slices.IndexFunc(back, func(x Overlap) bool { return x.Other == "a" })
					if i < 0 || !slices.Equal(back[i].IPs, o.IPs) || !slices.Equal(back[i].Ports, o.Ports) || !slices.Equal(back[i].Domains, o.Domains) {
						t.Errorf("overlaps of %s = %+v, want the mirror of %+v", o.Other, back, o)
					}
				}
			})
		}
	}
}

func TestEngine_OtherMeshesDoNotOverlap(t *testing.T) {
	e := NewEngine()
	e.Set(Service{Key: Key{"a", "x"}, Ranges: ranges(80, "10.0.0.0/8")})
	e.Set(Service{Key: Key{"b", "x"}, Ranges: ranges(80, "10.0.0.0/8")})
	if n := e.Pairs(); n != 0 {
		t.Errorf("Pairs = %d, want 0", n)
	}
}

// TestEngine_Incremental checks the events and the dirty services of each
// change: only the services whose overlaps changed.
func TestEngine_Incremental(t *testing.T) {
	e := NewEngine()
	e.Load([]Service{es("a", 80, "10.1.1.0/24"), es("b", 80, "10.1.1.7"), es("c", 80, "10.9.0.0/16")})
	wantEvents := []Event{{Mesh: "default", A: "a", B: "b", Ports: []int{80}, IPs: []string{"10.1.1.7"}}}
	if d := cmp.Diff(wantEvents, e.TakeEvents()); d != "" {
		t.Errorf("events of Load (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]Key{{"default", "a"}, {"default", "b"}}, e.TakeDirty()); d != "" {
		t.Errorf("dirty after Load (-want +got):\n%s", d)
	}

	steps := []struct {
		name   string
		change func()
		events []Event
		dirty  []string
		pairs  int
	}{
		{"SameRangesAgain", func() { e.Set(es("a", 80, "10.1.1.0/24")) }, nil, nil, 1},
		{"UnrelatedChange", func() { e.Set(es("c", 80, "10.8.0.0/16")) }, nil, nil, 1},
		{"OverlapGrows", func() { e.Set(es("b", 80, "10.1.1.7", 80, "10.1.1.8")) },
			[]Event{{Mesh: "default", A: "a", B: "b", Ports: []int{80}, IPs: []string{"10.1.1.7", "10.1.1.8"}}}, []string{"a", "b"}, 1},
		{"NewOverlap", func() { e.Set(es("c", 80, "10.1.0.0/16")) },
			[]Event{
				{Mesh: "default", A: "a", B: "c", Ports: []int{80}, IPs: []string{"10.1.1.0/24"}},
				{Mesh: "default", A: "b", B: "c", Ports: []int{80}, IPs: []string{"10.1.1.7", "10.1.1.8"}},
			}, []string{"a", "b", "c"}, 3},
		{"MovesToAnotherPort", func() { e.Set(es("b", 443, "10.1.1.7", 443, "10.1.1.8")) },
			[]Event{{Mesh: "default", A: "a", B: "b", Gone: true}, {Mesh: "default", A: "b", B: "c", Gone: true}}, []string{"a", "b", "c"}, 1},
		{"Deleted", func() { e.Delete(Key{"default", "c"}) },
			[]Event{{Mesh: "default", A: "a", B: "c", Gone: true}}, []string{"a"}, 0},
		{"UnknownDeleted", func() { e.Delete(Key{"default", "zz"}) }, nil, nil, 0},
	}
	for _, s := range steps {
		s.change()
		got := e.TakeEvents()
		slices.SortFunc(got, func(x, y Event) int { return strings.Compare(x.A+x.B, y.A+y.B) })
		if d := cmp.Diff(s.events, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s: events (-want +got):\n%s", s.name, d)
		}
		var dirty []string
		for _, k := range e.TakeDirty() {
			dirty = append(dirty, k.Name)
		}
		if d := cmp.Diff(s.dirty, dirty, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s: dirty (-want +got):\n%s", s.name, d)
		}
		if n := e.Pairs(); n != s.pairs {
			t.Errorf("%s: Pairs = %d, want %d", s.name, n, s.pairs)
		}
	}
}

// TestEngine_IncrementalEqualsAllPairs applies random changes and checks
// after each that the overlaps equal those of a plain all-pairs
// comparison of IP sets.
func TestEngine_IncrementalEqualsAllPairs(t *testing.T) {
	prefixes := []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.1.0/24", "10.1.1.7", "10.1.1.6/31", "10.1.1.0/25", "10.1.2.0/24", "10.2.0.0/16", "11.0.0.0/8",
		"0.0.0.0/0", "2001:db8::/32", "2001:db8:1::/48", "2001:db8:1::5", "::ffff:10.1.1.7", "::ffff:10.0.0.0/104"}
	names := []string{"a", "b", "c", "d", "e", "f"}
	for seed := range 50 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		e := NewEngine()
		live := map[Key]Service{}
		for op := range 60 {
			k := Key{[]string{"m1", "m2"}[r.IntN(2)], names[r.IntN(len(names))]}
			if r.IntN(4) == 0 {
				e.Delete(k)
				delete(live, k)
			} else {
				var pairs []any
				for range r.IntN(4) {
					pairs = append(pairs, []int{80, 443}[r.IntN(2)], prefixes[r.IntN(len(prefixes))])
				}
				s := Service{Key: k, Ranges: ranges(pairs...)}
				e.Set(s)
				live[k] = s
			}
			total := 0
			for k := range live {
				want := allPairs(live, k)
				total += len(want)
				if d := cmp.Diff(want, e.Overlaps(k), cmpopts.EquateEmpty()); d != "" {
					t.Fatalf("seed %d op %d: overlaps of %v (-all pairs +incremental):\n%s", seed, op, k, d)
				}
			}
			if e.Pairs() != total/2 {
				t.Fatalf("seed %d op %d: Pairs = %d, want %d", seed, op, e.Pairs(), total/2)
			}
		}
	}
}

// allPairs is the obvious computation the engine must agree with.
func allPairs(live map[Key]Service, k Key) []Overlap {
	set := func(s Service, port int) *netipx.IPSet {
		var b netipx.IPSetBuilder
		for _, p := range s.Ranges[port] {
			if a := p.Addr(); a.Is4In6() {
				p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
			}
			b.AddPrefix(p.Masked())
		}
		st, _ := b.IPSet()
		return st
	}
	var out []Overlap
	for _, o := range slices.SortedFunc(func(yield func(Key) bool) {
		for x := range live {
			if !yield(x) {
				return
			}
		}
	}, func(a, b Key) int { return strings.Compare(a.Name, b.Name) }) {
		if o.Mesh != k.Mesh || o == k {
			continue
		}
		ov := Overlap{Other: o.Name}
		var all netipx.IPSetBuilder
		for _, port := range []int{80, 443} {
			var b netipx.IPSetBuilder
			b.AddSet(set(live[k], port))
			b.Intersect(set(live[o], port))
			s, _ := b.IPSet()
			if len(s.Prefixes()) > 0 {
				ov.Ports = append(ov.Ports, port)
				all.AddSet(s)
			}
		}
		s, _ := all.IPSet()
		for _, p := range s.Prefixes() {
			if p.IsSingleIP() {
				ov.IPs = append(ov.IPs, p.Addr().String())
			} else {
				ov.IPs = append(ov.IPs, p.String())
			}
		}
		if len(ov.Ports) > 0 {
			out = append(out, ov)
		}
	}
	return out
}

// TestEngine_DomainChanges follows a domain overlap through changes: it
// begins, moves to another domain, and ends when a service goes.
func TestEngine_DomainChanges(t *testing.T) {
	e := NewEngine()
	e.Set(withDomains(es("a"), 443, "x.com", 443, "y.com"))
	e.Set(withDomains(es("b"), 443, "x.com"))
	e.Set(withDomains(es("b"), 443, "y.com"))
	e.Delete(Key{"default", "a"})
	want := []Event{
		{Mesh: "default", A: "a", B: "b", Ports: []int{443}, Domains: []string{"x.com"}},
		{Mesh: "default", A: "a", B: "b", Ports: []int{443}, Domains: []string{"y.com"}},
		{Mesh: "default", A: "a", B: "b", Gone: true},
	}
	if d := cmp.Diff(want, e.TakeEvents()); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if e.Pairs() != 0 || len(e.Overlaps(Key{"default", "b"})) != 0 {
		t.Errorf("after the deletion: %d pairs, overlaps of b %v", e.Pairs(), e.Overlaps(Key{"default", "b"}))
	}
}

func TestMessage(t *testing.T) {
	// seed 003's words, with the real names and the overlapping range.
	got := Message("external-service1", "external-service2", []string{"10.1.1.7"})
	if want := "external-service1 and external-service2 have overlapping IPs 10.1.1.7, which can disrupt your traffic."; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	if got := Message("a", "b", []string{"10.0.0.0/24", "10.0.2.1"}); got != "a and b have overlapping IPs 10.0.0.0/24, 10.0.2.1, which can disrupt your traffic." {
		t.Errorf("Message with two ranges = %q", got)
	}
}

func TestOverlap_Messages(t *testing.T) {
	o := Overlap{Other: "b", Ports: []int{80, 443}, IPs: []string{"10.1.1.1"}, Domains: []string{"x.com", "y.com"}}
	want := []string{
		"a and b have overlapping IPs 10.1.1.1, which can disrupt your traffic.",
		"a and b both match the domains x.com, y.com, which can disrupt your traffic.",
	}
	if d := cmp.Diff(want, o.Messages("a")); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	if got := DomainMessage("a", "b", []string{"x.com"}); got != "a and b both match the domain x.com, which can disrupt your traffic." {
		t.Errorf("DomainMessage = %q", got)
	}
}
