package extsvc

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"go4.org/netipx"
)

// This file holds the pure, incremental core: which external services of a
// mesh capture overlapping IPs on a port (seed 003, "IP intersections").
//
// Every range is a prefix: an IP match is a /32 or /128, a CIDR match is
// canonical (validation). Two prefixes overlap exactly when one contains the
// other, so the index of one mesh and port needs no interval tree: the
// prefixes that contain a prefix P are P's address cut to each shorter
// length present (map lookups), and the prefixes inside P are those whose
// address lies in P's range, a contiguous run of the index sorted by
// address (a binary search). A change therefore looks only at the services
// whose ranges meet it on one of its ports, never at every pair.
//
// The overlapping IPs of two services are the union, over their common
// ports, of the intersection of their ranges. Of two overlapping prefixes
// the intersection is the longer one, so the index walk yields the
// intersections themselves; a netipx set merges them into the fewest
// prefixes.
//
// An Engine is not safe for concurrent use; the controller owns it.

// Key names an external service.
type Key struct {
	Mesh, Name string
}

// Service is what the engine needs of an external service: the prefixes
// of its IP and CIDR matches, and the domains of its Domain matches (in
// lower case), by port.
type Service struct {
	Key     Key
	Ranges  map[int][]netip.Prefix
	Domains map[int][]string
}

// Overlap is the overlap of a service with another one of its mesh.
type Overlap struct {
	Other string
	// Ports where both capture some of the IPs, in increasing order.
	Ports []int
	// IPs are the overlapping addresses, as prefixes (a single address
	// without its length), in address order.
	IPs []string
	// Domains are the domains both match on a common port, in order.
	Domains []string
}

// Event says that two services started or stopped overlapping, or that the
// IPs they share changed. A and B are in name order.
type Event struct {
	Mesh string
	A, B string
	// Ports, IPs and Domains as in Overlap; empty when Gone.
	Ports   []int
	IPs     []string
	Domains []string
	Gone    bool
}

// Message is seed 003's sentence for two overlapping services.
func Message(a, b string, ips []string) string {
	return fmt.Sprintf("%s and %s have overlapping IPs %s, which can disrupt your traffic.", a, b, strings.Join(ips, ", "))
}

// DomainMessage is the same sentence for two services that match the
// same domains on a port: a proxy sends that traffic to one of them.
func DomainMessage(a, b string, domains []string) string {
	what := "domain"
	if len(domains) > 1 {
		what = "domains"
	}
	return fmt.Sprintf("%s and %s both match the %s %s, which can disrupt your traffic.", a, b, what, strings.Join(domains, ", "))
}

// Messages are the sentences of an overlap of a with o.Other.
func (o Overlap) Messages(a string) []string {
	var out []string
	if len(o.IPs) > 0 {
		out = append(out, Message(a, o.Other, o.IPs))
	}
	if len(o.Domains) > 0 {
		out = append(out, DomainMessage(a, o.Other, o.Domains))
	}
	return out
}

// Engine finds overlapping external services.
type Engine struct {
	meshes map[string]*meshState
	dirty  map[Key]struct{}
	events []Event
	pairs  int
}

type meshState struct {
	svcs  map[string]*svcState
	ports map[int]*portIndex
	// domains are the services that match each domain, by port.
	domains map[int]map[string][]*svcState
}

type svcState struct {
	name    string
	ranges  map[int][]netip.Prefix
	domains map[int][]string
	// overlaps with other services of the mesh, by their name.
	overlaps map[string]*Overlap
}

// portIndex holds the prefixes of one mesh and port.
type portIndex struct {
	owners map[netip.Prefix][]*svcState
	// sorted are the prefixes of owners, by address then length.
	sorted []netip.Prefix
	// lengths counts the prefixes of each length, per family, so that the
	// prefixes containing a given one are looked up at those lengths only.
	lengths map[lengthKey]int
}

type lengthKey struct {
	v6   bool
	bits int
}

// NewEngine returns an empty engine.
func NewEngine() *Engine {
	return &Engine{meshes: map[string]*meshState{}, dirty: map[Key]struct{}{}}
}

// Load adds services to an empty engine at once: it builds the indexes
// with one sort per port instead of an insertion per prefix, then finds the
// overlaps of each service.
func (e *Engine) Load(svcs []Service) {
	for _, s := range svcs {
		m := e.mesh(s.Key.Mesh)
		st := &svcState{name: s.Key.Name, ranges: normalize(s.Ranges), domains: normalizeDomains(s.Domains), overlaps: map[string]*Overlap{}}
		m.svcs[st.name] = st
		m.addDomains(st)
		for port, ps := range st.ranges {
			idx := m.port(port)
			for _, p := range ps {
				if len(idx.owners[p]) == 0 {
					idx.sorted = append(idx.sorted, p)
				}
				idx.own(p, st)
			}
		}
	}
	for _, m := range e.meshes {
		for _, idx := range m.ports {
			slices.SortFunc(idx.sorted, byAddr)
		}
	}
	for _, s := range svcs {
		m := e.meshes[s.Key.Mesh]
		e.refresh(s.Key.Mesh, m, m.svcs[s.Key.Name], nil)
	}
}

// Set adds or replaces a service.
func (e *Engine) Set(s Service) {
	m := e.mesh(s.Key.Mesh)
	st := m.svcs[s.Key.Name]
	ranges, domains := normalize(s.Ranges), normalizeDomains(s.Domains)
	var before []string
	if st == nil {
		st = &svcState{name: s.Key.Name, overlaps: map[string]*Overlap{}}
		m.svcs[st.name] = st
	} else {
		if equalRanges(st.ranges, ranges) && equalDomains(st.domains, domains) {
			return
		}
		m.remove(st)
		before = slices.Collect(maps.Keys(st.overlaps))
	}
	st.ranges, st.domains = ranges, domains
	m.add(st)
	e.refresh(s.Key.Mesh, m, st, before)
}

// Delete removes a service.
func (e *Engine) Delete(k Key) {
	m := e.meshes[k.Mesh]
	if m == nil || m.svcs[k.Name] == nil {
		return
	}
	st := m.svcs[k.Name]
	m.remove(st)
	st.ranges, st.domains = nil, nil
	e.refresh(k.Mesh, m, st, slices.Collect(maps.Keys(st.overlaps)))
	delete(m.svcs, k.Name)
	delete(e.dirty, k)
	if len(m.svcs) == 0 {
		delete(e.meshes, k.Mesh)
	}
}

// Overlaps returns the overlaps of service k, by the other's name.
func (e *Engine) Overlaps(k Key) []Overlap {
	m := e.meshes[k.Mesh]
	if m == nil || m.svcs[k.Name] == nil {
		return nil
	}
	st := m.svcs[k.Name]
	out := make([]Overlap, 0, len(st.overlaps))
	for _, name := range slices.Sorted(maps.Keys(st.overlaps)) {
		out = append(out, *st.overlaps[name])
	}
	return out
}

// Pairs returns how many pairs of services overlap.
func (e *Engine) Pairs() int { return e.pairs }

// TakeDirty returns the services whose overlaps changed since the last
// call, in key order, and forgets them.
func (e *Engine) TakeDirty() []Key {
	out := slices.SortedFunc(maps.Keys(e.dirty), func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Mesh, b.Mesh), cmp.Compare(a.Name, b.Name))
	})
	clear(e.dirty)
	return out
}

// TakeEvents returns the pair changes since the last call, in order.
func (e *Engine) TakeEvents() []Event {
	out := e.events
	e.events = nil
	return out
}

func (e *Engine) mesh(name string) *meshState {
	m := e.meshes[name]
	if m == nil {
		m = &meshState{svcs: map[string]*svcState{}, ports: map[int]*portIndex{}, domains: map[int]map[string][]*svcState{}}
		e.meshes[name] = m
	}
	return m
}

// refresh recomputes the overlaps of st, which was just indexed with its
// current ranges; before are the services it overlapped until now.
func (e *Engine) refresh(mesh string, m *meshState, st *svcState, before []string) {
	found := map[*svcState]*shared{}
	// with returns what st shares with o on port, nil for st itself.
	with := func(o *svcState, port int) *shared {
		if o == st {
			return nil
		}
		sh := found[o]
		if sh == nil {
			sh = &shared{}
			found[o] = sh
		}
		if !slices.Contains(sh.ports, port) {
			sh.ports = append(sh.ports, port)
		}
		return sh
	}
	for _, port := range slices.Sorted(maps.Keys(st.ranges)) {
		idx := m.ports[port]
		for _, p := range st.ranges[port] {
			idx.overlapping(p, func(o *svcState, q netip.Prefix) {
				if sh := with(o, port); sh != nil {
					if q.Bits() < p.Bits() {
						q = p // the longer prefix is the intersection
					}
					sh.ips.AddPrefix(q)
				}
			})
		}
	}
	for port, ds := range st.domains {
		for _, d := range ds {
			for _, o := range m.domains[port][d] {
				if sh := with(o, port); sh != nil {
					sh.domains = append(sh.domains, d)
				}
			}
		}
	}
	for o, sh := range found {
		ov := sh.overlap(o.name)
		if old := st.overlaps[o.name]; old != nil && slices.Equal(old.Ports, ov.Ports) && slices.Equal(old.IPs, ov.IPs) && slices.Equal(old.Domains, ov.Domains) {
			continue
		}
		if st.overlaps[o.name] == nil {
			e.pairs++
		}
		st.overlaps[o.name] = &ov
		back := ov
		back.Other = st.name
		o.overlaps[st.name] = &back
		e.changed(mesh, st, o, ov, false)
	}
	for _, name := range before {
		o := m.svcs[name]
		if _, still := found[o]; still {
			continue
		}
		delete(st.overlaps, name)
		delete(o.overlaps, st.name)
		e.pairs--
		e.changed(mesh, st, o, Overlap{}, true)
	}
}

func (e *Engine) changed(mesh string, a, b *svcState, ov Overlap, gone bool) {
	e.dirty[Key{mesh, a.name}] = struct{}{}
	e.dirty[Key{mesh, b.name}] = struct{}{}
	x, y := a.name, b.name
	if y < x {
		x, y = y, x
	}
	e.events = append(e.events, Event{Mesh: mesh, A: x, B: y, Ports: ov.Ports, IPs: ov.IPs, Domains: ov.Domains, Gone: gone})
}

// shared collects what a changed service shares with another one.
type shared struct {
	ports   []int
	ips     netipx.IPSetBuilder
	domains []string
}

// overlap returns what was collected, as the changed service's overlap
// with other.
func (sh *shared) overlap(other string) Overlap {
	slices.Sort(sh.ports)
	set, _ := sh.ips.IPSet() // prefixes from normalize are valid
	slices.Sort(sh.domains)
	ov := Overlap{Other: other, Ports: sh.ports, Domains: slices.Compact(sh.domains)}
	for _, p := range set.Prefixes() {
		if p.IsSingleIP() {
			ov.IPs = append(ov.IPs, p.Addr().String())
		} else {
			ov.IPs = append(ov.IPs, p.String())
		}
	}
	return ov
}

func (m *meshState) port(port int) *portIndex {
	idx := m.ports[port]
	if idx == nil {
		idx = &portIndex{owners: map[netip.Prefix][]*svcState{}, lengths: map[lengthKey]int{}}
		m.ports[port] = idx
	}
	return idx
}

// addDomains indexes the domains of st.
func (m *meshState) addDomains(st *svcState) {
	for port, ds := range st.domains {
		if m.domains[port] == nil {
			m.domains[port] = map[string][]*svcState{}
		}
		for _, d := range ds {
			m.domains[port][d] = append(m.domains[port][d], st)
		}
	}
}

func (m *meshState) add(st *svcState) {
	m.addDomains(st)
	for port, ps := range st.ranges {
		idx := m.port(port)
		for _, p := range ps {
			if len(idx.owners[p]) == 0 {
				i, _ := slices.BinarySearchFunc(idx.sorted, p, byAddr)
				idx.sorted = slices.Insert(idx.sorted, i, p)
			}
			idx.own(p, st)
		}
	}
}

func (m *meshState) remove(st *svcState) {
	for port, ds := range st.domains {
		for _, d := range ds {
			m.domains[port][d] = slices.DeleteFunc(m.domains[port][d], func(o *svcState) bool { return o == st })
			if len(m.domains[port][d]) == 0 {
				delete(m.domains[port], d)
			}
		}
		if len(m.domains[port]) == 0 {
			delete(m.domains, port)
		}
	}
	for port, ps := range st.ranges {
		idx := m.ports[port]
		for _, p := range ps {
			idx.owners[p] = slices.DeleteFunc(idx.owners[p], func(o *svcState) bool { return o == st })
			if len(idx.owners[p]) > 0 {
				continue
			}
			delete(idx.owners, p)
			if i, ok := slices.BinarySearchFunc(idx.sorted, p, byAddr); ok {
				idx.sorted = slices.Delete(idx.sorted, i, i+1)
			}
			lk := lengthKey{p.Addr().Is6(), p.Bits()}
			if idx.lengths[lk]--; idx.lengths[lk] == 0 {
				delete(idx.lengths, lk)
			}
		}
		if len(idx.owners) == 0 {
			delete(m.ports, port)
		}
	}
}

func (idx *portIndex) own(p netip.Prefix, st *svcState) {
	if len(idx.owners[p]) == 0 {
		idx.lengths[lengthKey{p.Addr().Is6(), p.Bits()}]++
	}
	idx.owners[p] = append(idx.owners[p], st)
}

// overlapping calls f with every owner of a prefix q that overlaps p, and
// q: the prefixes containing p, and those inside it (p itself included).
func (idx *portIndex) overlapping(p netip.Prefix, f func(*svcState, netip.Prefix)) {
	v6 := p.Addr().Is6()
	for lk := range idx.lengths {
		if lk.v6 != v6 || lk.bits >= p.Bits() {
			continue
		}
		outer, _ := p.Addr().Prefix(lk.bits)
		for _, o := range idx.owners[outer] {
			f(o, outer)
		}
	}
	last := netipx.PrefixLastIP(p)
	i, _ := slices.BinarySearchFunc(idx.sorted, p.Addr(), func(q netip.Prefix, a netip.Addr) int { return q.Addr().Compare(a) })
	for ; i < len(idx.sorted) && idx.sorted[i].Addr().Compare(last) <= 0; i++ {
		if q := idx.sorted[i]; q.Bits() >= p.Bits() {
			for _, o := range idx.owners[q] {
				f(o, q)
			}
		}
	}
}

// normalize returns ranges with every prefix masked, IPv4-mapped IPv6
// prefixes as IPv4 (the proxy sees the IPv4 address), sorted and without
// repeats; invalid prefixes and empty ports are dropped.
func normalize(in map[int][]netip.Prefix) map[int][]netip.Prefix {
	out := map[int][]netip.Prefix{}
	for port, ps := range in {
		var n []netip.Prefix
		for _, p := range ps {
			if !p.IsValid() {
				continue
			}
			if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
			}
			n = append(n, p.Masked())
		}
		if len(n) > 0 {
			slices.SortFunc(n, byAddr)
			out[port] = slices.Compact(n)
		}
	}
	return out
}

// byAddr orders prefixes by address, then length: the prefixes inside a
// prefix P then form one run, from P's address to its last.
func byAddr(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// normalizeDomains returns domains in lower case, sorted and without
// repeats; empty ports are dropped.
func normalizeDomains(in map[int][]string) map[int][]string {
	if len(in) == 0 {
		return nil // most services match no domain
	}
	out := map[int][]string{}
	for port, ds := range in {
		var n []string
		for _, d := range ds {
			n = append(n, strings.ToLower(d))
		}
		if len(n) > 0 {
			slices.Sort(n)
			out[port] = slices.Compact(n)
		}
	}
	return out
}

func equalDomains(a, b map[int][]string) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]string])
}

func equalRanges(a, b map[int][]netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	for port, ps := range a {
		if !slices.Equal(ps, b[port]) {
			return false
		}
	}
	return true
}
