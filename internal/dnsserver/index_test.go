package dnsserver

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"unsafe"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/resource"
)

// refView is the view computed the plain way, from scratch: the reference
// the incremental index is checked against.
type refView struct {
	names    map[string]*Entry
	parents  map[string]struct{}
	ptr      map[string]string
	rejected []Rejection
}

func referenceView(svcs []ServiceNames) refView {
	svcs = slices.Clone(svcs)
	// The later decision first, then the older service.
	slices.SortFunc(svcs, func(a, b ServiceNames) int {
		return cmp.Or(cmp.Compare(b.Revision, a.Revision), serviceOrder(&a, &b))
	})
	type cand struct {
		svc int
		n   *Name
	}
	var cands []cand
	for i := range svcs {
		for j := range svcs[i].Names {
			cands = append(cands, cand{i, &svcs[i].Names[j]})
		}
	}
	v := refView{names: map[string]*Entry{}, parents: map[string]struct{}{}, ptr: map[string]string{}}
	for _, c := range cands {
		key := svcs[c.svc].Key
		if prev, taken := v.names[c.n.Name]; taken {
			if prev.Service != key {
				v.rejected = append(v.rejected, Rejection{Name: c.n.Name, Service: key, Source: c.n.Source(),
					Reason: fmt.Sprintf("the name is answered for %s (%s)", prev.Service, prev.Source)})
			}
			continue
		}
		e := &Entry{Name: c.n.Name, Service: key, Source: c.n.Source()}
		for _, a := range svcs[c.svc].AddrsOf(c.n) {
			if a.Is4() {
				e.A = append(e.A, a)
			} else {
				e.AAAA = append(e.AAAA, a)
			}
		}
		v.names[c.n.Name] = e
		for _, p := range svcs[c.svc].PortsOf(c.n) {
			srv := "_" + p.Name + "._tcp." + c.n.Name
			if _, taken := v.names[srv]; !taken {
				v.names[srv] = &Entry{Name: srv, Service: key, Source: c.n.Source(), SRV: []SRV{{Target: c.n.Name, Port: p.Port}}}
			}
		}
	}
	for n := range v.names {
		for p := parent(n); p != ""; p = parent(p) {
			if _, isName := v.names[p]; !isName {
				v.parents[p] = struct{}{}
			}
		}
	}
	// An address points at the first name of the first of its services, in
	// service order, that has one.
	slices.SortFunc(svcs, func(a, b ServiceNames) int { return serviceOrder(&a, &b) })
	for _, svc := range svcs {
		first := ""
		for _, n := range svc.Names {
			if e, ok := v.names[n.Name]; ok && e.Service == svc.Key {
				first = n.Name
				break
			}
		}
		if first == "" {
			continue
		}
		for _, ip := range svc.VIPs {
			if rev, err := dns.ReverseAddr(ip.String()); err == nil {
				if _, taken := v.ptr[rev]; !taken {
					v.ptr[rev] = first
				}
			}
		}
	}
	slices.SortFunc(v.rejected, func(a, b Rejection) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Service.String(), b.Service.String()), cmp.Compare(a.Source, b.Source))
	})
	return v
}

// randomService draws a service whose names collide often with others'
// (two statuses listing one name Available, as while one lags): few
// hostnames, shared service tags, aliases equal to hostnames, ports,
// shared VIPs now and then, names that others are below.
func randomService(r *rand.Rand, i int) ServiceNames {
	key := resource.Key{Kind: []resource.Kind{resource.MeshService, resource.MeshExternalService}[r.IntN(2)], Mesh: "m", Name: fmt.Sprintf("s%d", i)}
	s := ServiceNames{Key: key, Created: int64(r.IntN(5)) * 1e9, Revision: int64(r.IntN(3))}
	vip := netip.AddrFrom4([4]byte{241, 0, 0, byte(1 + r.IntN(12))})
	s.VIPs = []netip.Addr{vip}
	if r.IntN(4) == 0 {
		s.VIPs = append(s.VIPs, netip.MustParseAddr(fmt.Sprintf("fd00::%d", 1+r.IntN(6))))
	}
	if r.IntN(3) == 0 {
		s.Ports = []SRVPort{{Name: []string{"http", "grpc"}[r.IntN(2)], Port: uint16(80 + r.IntN(3))}}
	}
	sources := []source{srcHostname, srcInternalVIP, srcServiceTag, srcAlias}
	for range 1 + r.IntN(4) {
		name := fmt.Sprintf("%s.%s.mesh.", []string{"a", "b", "c", "d", "e", "f"}[r.IntN(6)], []string{"svc", "ns1", "x.y"}[r.IntN(3)])
		if r.IntN(5) == 0 {
			name = parent(name) // a name that is the parent of others: answered, with answered names below
		}
		s.Names = append(s.Names, Name{Name: name, src: sources[r.IntN(len(sources))]}) // on s.VIPs
	}
	return s
}

// TestMeshIndex_MatchesReference applies random batches of creations,
// changes and deletions to one index, and after each batch compares its
// view with the reference computed from scratch; views published earlier
// must not change.
func TestMeshIndex_MatchesReference(t *testing.T) {
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 7))
		ix := newMeshIndex()
		live := map[resource.Key]ServiceNames{}
		type snapshot struct {
			v    *View
			want refView
		}
		var old []snapshot
		for step := range 25 {
			changes := map[resource.Key]*ServiceNames{}
			for range 1 + r.IntN(4) {
				i := r.IntN(10)
				key := resource.Key{Mesh: "m", Name: fmt.Sprintf("s%d", i)}
				for k := range live {
					if k.Name == key.Name {
						key = k
					}
				}
				if _, ok := live[key]; ok && r.IntN(3) == 0 {
					changes[key] = nil
					delete(live, key)
					continue
				}
				delete(live, key)
				s := randomService(r, i)
				if key.Kind != "" && key.Kind != s.Key.Kind {
					changes[key] = nil // the other kind's service of that name goes
				}
				changes[s.Key] = &s
				live[s.Key] = s
			}
			v := ix.apply(changes)
			want := referenceView(slices.Collect(maps.Values(live)))
			compareView(t, fmt.Sprintf("seed %d step %d", seed, step), v, want)
			old = append(old, snapshot{v, want})
		}
		for i, s := range old {
			compareView(t, fmt.Sprintf("seed %d: published view %d later", seed, i), s.v, s.want)
		}
		// With every service gone, the index keeps nothing: a count left
		// over would keep a name a parent for good.
		gone := map[resource.Key]*ServiceNames{}
		for k := range live {
			gone[k] = nil
		}
		v := ix.apply(gone)
		compareView(t, fmt.Sprintf("seed %d: all deleted", seed), v, referenceView(nil))
		if len(ix.svcs)+len(ix.contested)+len(ix.sharedVIPs)+len(ix.children) != 0 {
			t.Errorf("seed %d: all deleted, the index keeps %d services, %d contested names, %d shared VIPs, counts %v",
				seed, len(ix.svcs), len(ix.contested), len(ix.sharedVIPs), ix.children)
		}
		if t.Failed() {
			return
		}
	}
}

func compareView(t *testing.T, what string, v *View, want refView) {
	t.Helper()
	opt := cmpAddr
	if d := gocmp.Diff(want.names, namesOf(v), opt); d != "" {
		t.Errorf("%s: names (-want +got):\n%s", what, d)
	}
	if d := gocmp.Diff(want.parents, parentsOf(v)); d != "" {
		t.Errorf("%s: parents (-want +got):\n%s", what, d)
	}
	if d := gocmp.Diff(want.ptr, ptrOf(v)); d != "" {
		t.Errorf("%s: PTR (-want +got):\n%s", what, d)
	}
	if d := gocmp.Diff(want.rejected, v.Rejections()); d != "" {
		t.Errorf("%s: rejections (-want +got):\n%s", what, d)
	}
	if v.Len() != len(want.names) {
		t.Errorf("%s: Len %d, want %d", what, v.Len(), len(want.names))
	}
	// Addresses gives what A and AAAA queries are answered with.
	wantAddrs, gotAddrs := map[string]NameAddrs{}, map[string]NameAddrs{}
	for name, e := range want.names {
		if len(e.A)+len(e.AAAA) > 0 {
			wantAddrs[name] = NameAddrs{Name: name, Service: e.Service, Addrs: slices.Concat(e.A, e.AAAA)}
		}
	}
	for n := range v.Addresses() {
		gotAddrs[n.Name] = n
	}
	if d := gocmp.Diff(wantAddrs, gotAddrs, opt); d != "" {
		t.Errorf("%s: addresses (-want +got):\n%s", what, d)
	}
}

// TestSourceIndex_MatchesReference does the same for Dataplane addresses.
func TestSourceIndex_MatchesReference(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 11))
		ix := newSourceIndex()
		live := map[resource.Key]*resource.Object{}
		for step := range 20 {
			changes := map[resource.Key]*resource.Object{}
			for range 1 + r.IntN(3) {
				mesh, name := []string{"a", "b"}[r.IntN(2)], fmt.Sprintf("dp%d", r.IntN(8))
				k := resource.Key{Kind: resource.Dataplane, Mesh: mesh, Name: name}
				if _, ok := live[k]; ok && r.IntN(3) == 0 {
					changes[k] = nil
					delete(live, k)
					continue
				}
				addr := fmt.Sprintf("10.0.0.%d", 1+r.IntN(5))
				if r.IntN(6) == 0 {
					addr = "dp.example"
				}
				dp := dataplane(mesh, name, r.IntN(4), addr)
				changes[k] = dp
				live[k] = dp
			}
			got := maps.Collect(ix.apply(changes).All())
			want := maps.Collect(Sources(slices.Collect(maps.Values(live))).All())
			// The reference: the oldest Dataplane (then mesh, then name) of each address.
			ref := map[netip.Addr]string{}
			best := map[netip.Addr]*resource.Object{}
			for _, dp := range live {
				ip, err := netip.ParseAddr(dp.Spec.(*resource.DataplaneSpec).Networking.Address)
				if err != nil {
					continue
				}
				if b := best[ip]; b == nil || cmp.Or(dp.CreationTime.Compare(b.CreationTime), cmp.Compare(dp.Mesh, b.Mesh), cmp.Compare(dp.Name, b.Name)) < 0 {
					best[ip] = dp
					ref[ip] = dp.Mesh
				}
			}
			if d := gocmp.Diff(ref, got, cmpAddr); d != "" {
				t.Fatalf("seed %d step %d: incremental (-want +got):\n%s", seed, step, d)
			}
			if d := gocmp.Diff(ref, want, cmpAddr); d != "" {
				t.Fatalf("seed %d step %d: from scratch (-want +got):\n%s", seed, step, d)
			}
		}
	}
}

// TestIndex_StateSizes pins the size of what the index keeps per name: a
// Kubernetes Service has four names, so a field added to one of these
// costs 40,000 times over at 10,000 Services. Sizes are for 64-bit
// platforms.
func TestIndex_StateSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are pinned for 64-bit platforms")
	}
	for _, tt := range []struct {
		name      string
		got, want uintptr
	}{
		{"Name", unsafe.Sizeof(Name{}), 24},
		{"claim", unsafe.Sizeof(claim{}), 16},
	} {
		if tt.got > tt.want {
			t.Errorf("%s is %d bytes, more than %d", tt.name, tt.got, tt.want)
		}
	}
}
