package dnsserver

import (
	"cmp"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/resource"
)

// View holds the names of one mesh. It is immutable: the builder derives
// the next view from it, sharing every shard a change does not touch.
type View struct {
	// names holds each answered name's winning claim; the Entry is
	// derived from it when asked for, so a name costs a map slot and no
	// allocation of its own.
	names cowMap[string, claim]
	// parents are the names that own no record but have names below them
	// (empty non-terminals such as svc.mesh.local. or _tcp.web.mesh.):
	// they exist, so they get NODATA rather than NXDOMAIN, which resolvers
	// take for "no name below" (RFC 8020, QNAME minimisation).
	parents cowMap[string, struct{}]
	// ptr maps addresses to a service's first answered name, for the
	// reverse names (7.0.0.241.in-addr.arpa.) of those addresses. An
	// address whose services have no answered name maps to one of them
	// with no name: the index learns an address's only holder here.
	ptr cowMap[netip.Addr, ptrEntry]
	// rejected are, by name, the services that want it and do not get it.
	rejected cowMap[string, []Rejection]
	// refused are, by service, the names it would have that cannot be
	// answered at all (no address, not a valid DNS name).
	refused cowMap[resource.Key, []Rejection]
	// srv counts the SRV names: they are not stored but derived from their
	// target's entry (_http._tcp.web.mesh. from web.mesh.'s ports), which
	// halves what a service with ports costs.
	srv int
}

func newView() *View {
	return &View{
		names:    newCowMap[string, claim](hashString),
		parents:  newCowMap[string, struct{}](hashString),
		ptr:      newCowMap[netip.Addr, ptrEntry](hashAddr),
		rejected: newCowMap[string, []Rejection](hashString),
		refused:  newCowMap[resource.Key, []Rejection](hashKey),
	}
}

// Lookup returns the records of a lower case fully qualified name.
func (v *View) Lookup(name string) (Entry, bool) {
	if c, ok := v.names.Get(name); ok {
		return c.entry(), true
	}
	return v.lookupSRV(name)
}

// lookupSRV answers _<port>._tcp.<name> from the ports of <name>.
func (v *View) lookupSRV(name string) (Entry, bool) {
	port, rest, ok := strings.Cut(name, "._tcp.")
	if !ok || len(port) < 2 || port[0] != '_' || strings.Contains(port, ".") {
		return Entry{}, false
	}
	target, ok := v.names.Get(rest)
	if !ok {
		return Entry{}, false
	}
	for _, p := range target.ports() {
		if p.Name == port[1:] {
			return Entry{Name: name, Service: target.svc.Key, Source: target.name().Source(), SRV: []SRV{{Target: rest, Port: p.Port}}}, true
		}
	}
	return Entry{}, false
}

// IsParent reports whether name is an empty non-terminal.
func (v *View) IsParent(name string) bool {
	if _, ok := v.parents.Get(name); ok {
		return true
	}
	if rest, ok := strings.CutPrefix(name, "_tcp."); ok {
		c, ok := v.names.Get(rest)
		return ok && len(c.ports()) > 0
	}
	return false
}

// PTR returns the name a lower case reverse name points to.
func (v *View) PTR(rev string) (string, bool) {
	ip, ok := parseReverse(rev)
	if !ok {
		return "", false
	}
	e, ok := v.ptr.Get(ip)
	return e.name, ok && e.name != ""
}

// reverse is PTR for any name, skipping the lookup for names outside
// in-addr.arpa and ip6.arpa (nearly every query).
func (v *View) reverse(name string) (string, bool) {
	if !strings.HasSuffix(name, ".arpa.") {
		return "", false
	}
	return v.PTR(name)
}

// Len returns the number of names with records.
func (v *View) Len() int { return v.names.Len() + v.srv }

// Entries yields every name with records, SRV names included, in no
// particular order.
func (v *View) Entries() iter.Seq[*Entry] {
	return func(yield func(*Entry) bool) {
		for _, c := range v.names.All() {
			e := c.entry()
			if !yield(&e) {
				return
			}
			for _, p := range srvPorts(e.ports) {
				srv := &Entry{Name: "_" + p.Name + "._tcp." + e.Name, Service: e.Service, Source: e.Source, SRV: []SRV{{Target: e.Name, Port: p.Port}}}
				if !yield(srv) {
					return
				}
			}
		}
	}
}

// NameAddrs is a name with the addresses its A and AAAA queries are
// answered with.
type NameAddrs struct {
	Name    string // lower case, fully qualified
	Service resource.Key
	// Addrs are the A answers, then the AAAA answers.
	Addrs []netip.Addr
}

// Addresses yields every name answered with an address, in no particular
// order, without making an Entry of each (a proxy's DNS listener reads a
// whole view at every change). The addresses are the view's own: read
// them, do not change them.
func (v *View) Addresses() iter.Seq[NameAddrs] {
	return func(yield func(NameAddrs) bool) {
		for _, c := range v.names.All() {
			n := c.name()
			if addrs := c.addrs(); len(addrs) > 0 && !yield(NameAddrs{Name: n.Name, Service: c.svc.Key, Addrs: v4First(addrs)}) {
				return
			}
		}
	}
}

// Parents yields the empty non-terminals, in no particular order.
func (v *View) Parents() iter.Seq[string] {
	return func(yield func(string) bool) {
		for p := range v.parents.All() {
			if !yield(p) {
				return
			}
		}
		for name, c := range v.names.All() {
			if len(c.ports()) > 0 && !yield("_tcp."+name) {
				return
			}
		}
	}
}

// PTRs yields reverse names and their targets, in no particular order.
func (v *View) PTRs() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for ip, e := range v.ptr.All() {
			if e.name == "" {
				continue
			}
			rev, err := dns.ReverseAddr(ip.String())
			if err == nil && !yield(rev, e.name) {
				return
			}
		}
	}
}

// srvPorts are the ports that give SRV names: the first of each name.
func srvPorts(ports []SRVPort) []SRVPort {
	for i := 1; i < len(ports); i++ {
		for j := range i {
			if ports[j].Name == ports[i].Name {
				out := slices.Clone(ports[:i])
				for _, p := range ports[i:] {
					if !slices.ContainsFunc(out, func(q SRVPort) bool { return q.Name == p.Name }) {
						out = append(out, p)
					}
				}
				return out
			}
		}
	}
	return ports
}

// Rejections returns the names services want and do not get, sorted by
// name, service and source.
func (v *View) Rejections() []Rejection {
	var out []Rejection
	for _, rs := range v.rejected.All() {
		out = append(out, rs...)
	}
	for _, rs := range v.refused.All() {
		out = append(out, rs...)
	}
	slices.SortFunc(out, func(a, b Rejection) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Service.String(), b.Service.String()), cmp.Compare(a.Source, b.Source))
	})
	return out
}

// viewEdit is a change being made to a view.
type viewEdit struct {
	srv      int
	names    *cowEdit[string, claim]
	parents  *cowEdit[string, struct{}]
	ptr      *cowEdit[netip.Addr, ptrEntry]
	rejected *cowEdit[string, []Rejection]
	refused  *cowEdit[resource.Key, []Rejection]
}

func (v *View) edit() *viewEdit {
	return &viewEdit{srv: v.srv, names: v.names.edit(), parents: v.parents.edit(), ptr: v.ptr.edit(), rejected: v.rejected.edit(), refused: v.refused.edit()}
}

func (e *viewEdit) done() *View {
	return &View{srv: e.srv, names: e.names.done(), parents: e.parents.done(), ptr: e.ptr.done(), rejected: e.rejected.done(), refused: e.refused.done()}
}

// ptrEntry is the target of an address's reverse name, and its service.
type ptrEntry struct {
	svc  *ServiceNames
	name string // "" when no service holding the address has an answered name
}

// claim is one service wanting one name.
type claim struct {
	svc *ServiceNames
	idx int // into svc.Names
}

func (c claim) name() *Name { return &c.svc.Names[c.idx] }

// ports are the ports that give c's name SRV records.
func (c claim) ports() []SRVPort { return c.svc.PortsOf(c.name()) }

// addrs are the addresses c's name is answered with, IPv4 first.
func (c claim) addrs() []netip.Addr { return c.svc.AddrsOf(c.name()) }

// entry is the records of the name c claims. The addresses are slices of
// the claim's (Extract puts IPv4 before IPv6), so no allocation is made
// on the query path.
func (c claim) entry() Entry {
	n := c.name()
	a, aaaa := splitFamilies(c.addrs())
	return Entry{Name: n.Name, Service: c.svc.Key, Source: n.Source(), A: a, AAAA: aaaa, ports: c.ports()}
}

// splitFamilies returns the IPv4 and the IPv6 addresses of addrs, in
// order: sub-slices of addrs when its IPv4 addresses come first.
func splitFamilies(addrs []netip.Addr) (v4, v6 []netip.Addr) {
	i := 0
	for i < len(addrs) && addrs[i].Is4() {
		i++
	}
	if !slices.ContainsFunc(addrs[i:], netip.Addr.Is4) {
		if i > 0 {
			v4 = addrs[:i:i]
		}
		if i < len(addrs) {
			v6 = addrs[i:]
		}
		return v4, v6
	}
	for _, a := range addrs {
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	return v4, v6
}

// precedence orders claims on a name. The hostnames controller decides
// every name once (internal/hostname), so two services list one name
// Available only while the status of the one that lost it lags behind
// (written in a later transaction): the later decision, the status of the
// higher revision, holds it until then. Equal revisions (objects built in
// tests) fall back to the older service, then kind and name, then the
// service's own order.
func precedence(a, b claim) int {
	if c := cmp.Compare(b.svc.Revision, a.svc.Revision); c != 0 {
		return c
	}
	return cmp.Or(serviceOrder(a.svc, b.svc), cmp.Compare(a.idx, b.idx))
}

func serviceOrder(a, b *ServiceNames) int {
	return cmp.Or(cmp.Compare(a.Created, b.Created), cmp.Compare(a.Key.Kind, b.Key.Kind), cmp.Compare(a.Key.Name, b.Key.Name))
}

// meshIndex is what the builder keeps of one mesh to update its view
// incrementally: every claim on every name, so that the winner of a name
// is known without looking at other services. It is not safe for
// concurrent use; the views it publishes are.
type meshIndex struct {
	// svcs are the mesh's services, by kind and name: the mesh is the
	// index's, and without it a slot is 40 bytes rather than 56.
	svcs map[svcKey]*ServiceNames
	// contested holds every claim, best first, on each name that more
	// than one service wants. A name with one claimant is only in the
	// view, whose winner is then that claim: nearly every name has one,
	// and a second map of them cost about 80 bytes per service.
	contested map[string][]claim
	// sharedVIPs are the services holding each address that more than one
	// holds, in service order; the view's ptr gives an address's only
	// holder.
	sharedVIPs map[netip.Addr][]*ServiceNames
	// children counts, for each name, the names directly below it that
	// are live: answered, or with a live name below them. A name is a
	// parent (in the view) when it has any and is not answered itself.
	// Counting only direct children, a new name walks up only until an
	// ancestor that was live already (one step for nearly every name,
	// where counting every answered name below each ancestor walked to
	// the top).
	children map[string]int
	view     *View
}

// svcKey is a service's key within its mesh's index.
type svcKey struct {
	kind resource.Kind
	name string
}

func keyIn(k resource.Key) svcKey { return svcKey{k.Kind, k.Name} }

func newMeshIndex() *meshIndex {
	return &meshIndex{
		svcs: map[svcKey]*ServiceNames{}, contested: map[string][]claim{}, sharedVIPs: map[netip.Addr][]*ServiceNames{},
		children: map[string]int{}, view: newView(),
	}
}

// apply replaces the services in changes (nil removes one) and returns
// the new view. Only the names, reverse names and ancestors the changed
// services touch are looked at.
func (ix *meshIndex) apply(changes map[resource.Key]*ServiceNames) *View {
	ed := ix.view.edit()
	// names holds every claim on each name the changes touch, as they
	// become; the view being replaced gives a name's single claim.
	names := make(map[string][]claim, len(changes))
	claimsOf := func(name string) []claim {
		cs, ok := names[name]
		if !ok {
			if cs, ok = ix.contested[name]; !ok {
				if c, held := ix.view.names.Get(name); held {
					cs = []claim{c}
				}
			}
			cs = slices.Clone(cs) // the index's own until replaced below
		}
		return cs
	}
	// revs holds the services holding each address the changes touch, as
	// they become.
	revs := make(map[netip.Addr][]*ServiceNames, len(changes))
	holdersOf := func(rev netip.Addr) []*ServiceNames {
		ss, ok := revs[rev]
		if !ok {
			if ss, ok = ix.sharedVIPs[rev]; !ok {
				if e, held := ix.view.ptr.Get(rev); held {
					ss = []*ServiceNames{e.svc}
				}
			}
			ss = slices.Clone(ss) // the index's own until replaced below
		}
		return ss
	}
	// touched are the services whose first answered name may have
	// changed: a set of pointers, cheaper to hash than keys. It may hold
	// a service being replaced; every address of one is in revs already.
	touched := make(map[*ServiceNames]struct{}, len(changes))
	for key, next := range changes {
		if old := ix.svcs[keyIn(key)]; old != nil {
			for _, n := range old.Names {
				names[n.Name] = slices.DeleteFunc(claimsOf(n.Name), func(c claim) bool { return c.svc == old })
			}
			for _, rev := range distinct(old.VIPs) {
				revs[rev] = slices.DeleteFunc(holdersOf(rev), func(s *ServiceNames) bool { return s == old })
			}
			delete(ix.svcs, keyIn(key))
		}
		if next == nil || len(next.Refused()) == 0 {
			if _, had := ed.refused.Get(key); had {
				ed.refused.Delete(key)
			}
		} else {
			ed.refused.Set(key, next.Refused())
		}
		if next == nil {
			continue
		}
		ix.svcs[keyIn(key)] = next
		touched[next] = struct{}{}
		for i, n := range next.Names {
			c := claim{next, i}
			cs := claimsOf(n.Name)
			at, _ := slices.BinarySearchFunc(cs, c, precedence)
			names[n.Name] = slices.Insert(cs, at, c)
		}
		for _, rev := range distinct(next.VIPs) {
			ss := holdersOf(rev)
			at, _ := slices.BinarySearchFunc(ss, next, serviceOrder)
			revs[rev] = slices.Insert(ss, at, next)
		}
	}
	for name, cs := range names {
		// Only a name contested before or now can have rejections.
		_, was := ix.contested[name]
		if len(cs) > 1 {
			ix.contested[name] = slices.Clip(cs)
		} else if was {
			delete(ix.contested, name)
		}
		ix.resolve(ed, name, cs, was || len(cs) > 1, touched)
	}
	// A service that won or lost a name may have a new first name.
	for s := range touched {
		for _, rev := range distinct(s.VIPs) {
			if _, ok := revs[rev]; !ok {
				revs[rev] = holdersOf(rev)
			}
		}
	}
	for rev, ss := range revs {
		if len(ss) > 1 {
			ix.sharedVIPs[rev] = slices.Clip(ss)
		} else {
			delete(ix.sharedVIPs, rev)
		}
		ix.resolvePTR(ed, rev, ss)
	}
	ix.view = ed.done()
	return ix.view
}

// resolve publishes the winner of name among its claims cs (or removes
// the name) with its SRV names and rejections, and adds the previous and
// new winners to touched. contested says whether the name had more than
// one claim before or has now: only then can it have rejections.
func (ix *meshIndex) resolve(ed *viewEdit, name string, cs []claim, contested bool, touched map[*ServiceNames]struct{}) {
	var cur claim
	var had bool
	if len(cs) == 0 {
		if cur, had = ed.names.Get(name); had {
			ed.names.Delete(name)
		}
	} else {
		cur, had = ed.names.Put(name, cs[0])
	}
	if had {
		touched[cur.svc] = struct{}{}
		ed.srv -= len(srvPorts(cur.ports()))
	}
	if len(cs) == 0 {
		if contested {
			ed.rejected.Delete(name)
		}
		if had {
			ix.unpublished(ed, name)
		}
		return
	}
	w := cs[0]
	wn := w.name()
	touched[w.svc] = struct{}{}
	ed.srv += len(srvPorts(w.ports()))
	if !had {
		ix.published(ed, name)
	}
	if !contested {
		return
	}
	var rej []Rejection
	for _, c := range cs[1:] {
		// A name the winner lists twice (under two sources, in a status
		// the controller did not write so) is answered: not rejected.
		if c.svc.Key != w.svc.Key {
			rej = append(rej, Rejection{Name: name, Service: c.svc.Key, Source: c.name().Source(),
				Reason: fmt.Sprintf("the name is answered for %s (%s)", w.svc.Key, wn.Source())})
		}
	}
	if len(rej) > 0 {
		ed.rejected.Set(name, rej)
	} else {
		ed.rejected.Delete(name)
	}
}

// published records that name is answered now (ed.names holds it): a
// parent no longer, and live in its ancestors if it was not.
func (ix *meshIndex) published(ed *viewEdit, name string) {
	if ix.children[name] > 0 {
		ed.parents.Delete(name) // live already, as a parent
		return
	}
	for p := parent(name); p != ""; p = parent(p) {
		n := ix.children[p] + 1
		ix.children[p] = n
		if n > 1 {
			return // p was live, with another live child
		}
		if _, answered := ed.names.Get(p); answered {
			return // p was live, answered
		}
		ed.parents.Set(p, struct{}{}) // p is live now, as a parent
	}
}

// unpublished records that name is no longer answered (ed.names does not
// hold it): a parent if it has live children, else no longer live in its
// ancestors.
func (ix *meshIndex) unpublished(ed *viewEdit, name string) {
	if ix.children[name] > 0 {
		ed.parents.Set(name, struct{}{}) // live still, as a parent
		return
	}
	for p := parent(name); p != ""; p = parent(p) {
		if n := ix.children[p] - 1; n > 0 {
			ix.children[p] = n
			return // p is live still, with another live child
		}
		delete(ix.children, p)
		if _, answered := ed.names.Get(p); answered {
			return // p is live still, answered
		}
		ed.parents.Delete(p) // p is no longer live
	}
}

// resolvePTR points an address at the first answered name of the first
// of its holders (in service order) that has one, or at its first holder
// with no name, or removes it when nothing holds it.
func (ix *meshIndex) resolvePTR(ed *viewEdit, rev netip.Addr, holders []*ServiceNames) {
	if len(holders) == 0 {
		ed.ptr.Delete(rev)
		return
	}
	for _, s := range holders {
		for _, n := range s.Names {
			if c, ok := ed.names.Get(n.Name); ok && c.svc.Key == s.Key {
				ed.ptr.Set(rev, ptrEntry{s, n.Name})
				return
			}
		}
	}
	ed.ptr.Set(rev, ptrEntry{svc: holders[0]})
}

// distinct returns addresses without repeats, in order (ips itself when
// it has none, as it nearly always has).
func distinct(ips []netip.Addr) []netip.Addr {
	for i := 1; i < len(ips); i++ {
		if slices.Contains(ips[:i], ips[i]) {
			out := slices.Clone(ips[:i])
			for _, ip := range ips[i:] {
				if !slices.Contains(out, ip) {
					out = append(out, ip)
				}
			}
			return out
		}
	}
	return ips
}

// parseReverse returns the address a lower case, fully qualified reverse
// name stands for, in the form dns.ReverseAddr writes: four decimal labels
// under in-addr.arpa. (no leading zeros) or 32 hexadecimal nibbles under
// ip6.arpa. Any other name (a partial or non-canonical one) is not an
// address.
func parseReverse(name string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		var b [4]byte
		for i := 3; i >= 0; i-- {
			label := rest
			if i > 0 {
				var found bool
				label, rest, found = strings.Cut(rest, ".")
				if !found {
					return netip.Addr{}, false
				}
			} else if strings.Contains(rest, ".") {
				return netip.Addr{}, false
			}
			if len(label) == 0 || len(label) > 3 || (len(label) > 1 && label[0] == '0') {
				return netip.Addr{}, false
			}
			n := 0
			for _, c := range []byte(label) {
				if c < '0' || c > '9' {
					return netip.Addr{}, false
				}
				n = n*10 + int(c-'0')
			}
			if n > 255 {
				return netip.Addr{}, false
			}
			b[i] = byte(n)
		}
		return netip.AddrFrom4(b), true
	}
	if rest, ok := strings.CutSuffix(name, ".ip6.arpa."); ok {
		// 32 nibbles, lowest first, each followed by a dot but the last.
		if len(rest) != 63 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i := range 32 {
			c := rest[2*i]
			if i < 31 && rest[2*i+1] != '.' {
				return netip.Addr{}, false
			}
			var v byte
			switch {
			case c >= '0' && c <= '9':
				v = c - '0'
			case c >= 'a' && c <= 'f':
				v = c - 'a' + 10
			default:
				return netip.Addr{}, false
			}
			// Nibble i counts from the address's last one.
			pos := 31 - i
			if pos%2 == 0 {
				b[pos/2] |= v << 4
			} else {
				b[pos/2] |= v
			}
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}

// parent strips the first label of a fully qualified name; "" above the
// top-level label.
func parent(name string) string {
	off, end := dns.NextLabel(name, 0)
	if end {
		return ""
	}
	return name[off:]
}

// sourceIndex maps Dataplane addresses to meshes incrementally. The oldest
// Dataplane wins an address shared across meshes (a misconfiguration).
type sourceIndex struct {
	dps    map[resource.Key]*dpSource
	claims map[netip.Addr][]*dpSource
	m      cowMap[netip.Addr, string]
}

type dpSource struct {
	key     resource.Key
	created int64 // UnixNano
	addr    netip.Addr
}

func newSourceIndex() *sourceIndex {
	return &sourceIndex{dps: map[resource.Key]*dpSource{}, claims: map[netip.Addr][]*dpSource{}, m: newCowMap[netip.Addr, string](hashAddr)}
}

func sourceOrder(a, b *dpSource) int {
	return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.key.Mesh, b.key.Mesh), cmp.Compare(a.key.Name, b.key.Name))
}

// apply replaces the Dataplanes in changes (nil removes one) and returns
// the new map.
func (ix *sourceIndex) apply(changes map[resource.Key]*resource.Object) cowMap[netip.Addr, string] {
	ed := ix.m.edit()
	addrs := map[netip.Addr]struct{}{}
	for key, dp := range changes {
		if old := ix.dps[key]; old != nil {
			addrs[old.addr] = struct{}{}
			ix.claims[old.addr] = slices.DeleteFunc(ix.claims[old.addr], func(s *dpSource) bool { return s == old })
			if len(ix.claims[old.addr]) == 0 {
				delete(ix.claims, old.addr)
			}
			delete(ix.dps, key)
		}
		if dp == nil {
			continue
		}
		ip, err := netip.ParseAddr(dp.Spec.(*resource.DataplaneSpec).Networking.Address)
		if err != nil {
			continue // a DNS name: queries come from addresses
		}
		s := &dpSource{key: key, created: dp.CreationTime.UnixNano(), addr: ip.Unmap()}
		ix.dps[key] = s
		addrs[s.addr] = struct{}{}
		cs := ix.claims[s.addr]
		at, _ := slices.BinarySearchFunc(cs, s, sourceOrder)
		ix.claims[s.addr] = slices.Insert(cs, at, s)
	}
	for a := range addrs {
		if cs := ix.claims[a]; len(cs) > 0 {
			ed.Set(a, cs[0].key.Mesh)
		} else {
			ed.Delete(a)
		}
	}
	ix.m = ed.done()
	return ix.m
}
