package dnsserver

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/miekg/dns"
)

// Inspector answers what the table holds, on every instance, for the REST
// API's _dns listing, the GUI and the CLI, converted to the API's bodies:
// the readers see the table through it rather than walk it themselves. It
// reads the server's current table and, for what the table does not keep
// (a global's names, a service's own names), the cache. It is safe for
// concurrent use.
type Inspector struct {
	srv   *Server
	cache *cache.Cache
	opts  TableOptions
}

// NewInspector returns an inspector of srv's table, built from c with o.
func NewInspector(srv *Server, c *cache.Cache, o TableOptions) *Inspector {
	return &Inspector{srv: srv, cache: c, opts: o}
}

// Listing is the _dns listing of mesh: every name the table answers, SRV
// names included, and the names it does not answer, and why.
func (in *Inspector) Listing(mesh string) api.DNSListing {
	l := in.NotAnswered(mesh)
	if v := in.view(mesh); v != nil {
		for e := range v.Entries() {
			l.Names = append(l.Names, dnsName(e))
		}
	}
	return l
}

// view returns the table's view of mesh, nil while there is none.
func (in *Inspector) view(mesh string) *View {
	if t := in.srv.Table(); t != nil {
		return t.Views[mesh]
	}
	return nil // still loading
}

// NotAnswered is the _dns listing of mesh without its names: the names the
// table does not answer, and why. A global's table holds no services
// (GlobalAnswersNoNames): every name of every service of the mesh is one
// it does not answer, listed from the cache when asked for rather than
// kept.
func (in *Inspector) NotAnswered(mesh string) api.DNSListing {
	var l api.DNSListing
	c, o := in.cache, in.opts
	if o.Global {
		for _, k := range ServiceKinds {
			c.Scan(cache.Query{Kind: k, Mesh: mesh, Unordered: true}, func(obj *resource.Object) {
				names := Extract(obj, o)
				for _, r := range names.Refused() {
					l.NotAnswered = append(l.NotAnswered, notAnswer(r))
				}
			})
		}
		return l
	}
	if v := in.view(mesh); v != nil {
		for _, r := range v.Rejections() {
			l.NotAnswered = append(l.NotAnswered, notAnswer(r))
		}
	}
	return l
}

func notAnswer(r Rejection) api.DNSNotAnswer {
	return api.DNSNotAnswer{Name: r.Name, Kind: r.Service.Kind, Service: r.Service.Name, Source: r.Source, Reason: r.Reason}
}

// Page returns the names [offset, offset+limit) of the _dns listing of
// mesh, in its order (by name), among those whose name, service or
// addresses contain q; and how many there are. Only the page is converted.
func (in *Inspector) Page(mesh, q string, offset, limit int) ([]api.DNSName, int) {
	v := in.view(mesh)
	if v == nil {
		return nil, 0
	}
	var names []string
	var buf []byte
	w := []byte(q)
	for e := range v.Entries() {
		ok := q == "" || strings.Contains(e.Name, q) || strings.Contains(e.Service.Name, q)
		for _, ips := range [][]netip.Addr{e.A, e.AAAA} {
			for _, ip := range ips {
				if !ok {
					buf = ip.AppendTo(buf[:0])
					ok = bytes.Contains(buf, w)
				}
			}
		}
		if ok {
			names = append(names, e.Name)
		}
	}
	slices.Sort(names)
	var out []api.DNSName
	for _, name := range names[min(offset, len(names)):min(offset+limit, len(names))] {
		if e, ok := v.Lookup(name); ok {
			out = append(out, dnsName(&e))
		}
	}
	return out, len(names)
}

// dnsName converts a table entry for the API and the GUI.
func dnsName(e *Entry) api.DNSName {
	n := api.DNSName{Name: e.Name, Kind: e.Service.Kind, Service: e.Service.Name, Source: e.Source}
	for _, ip := range e.A {
		n.A = append(n.A, ip.String())
	}
	for _, ip := range e.AAAA {
		n.AAAA = append(n.AAAA, ip.String())
	}
	for _, r := range e.SRV {
		n.SRV = append(n.SRV, fmt.Sprintf("%d %s", r.Port, r.Target))
	}
	switch {
	case len(n.SRV) > 0:
		n.Types = []string{"SRV"}
	default:
		if len(n.A) > 0 {
			n.Types = append(n.Types, "A")
		}
		if len(n.AAAA) > 0 {
			n.Types = append(n.Types, "AAAA")
		}
	}
	return n
}

// Service lists what the table answers for the service k: the names its
// status lists (Extract), each looked up in its mesh's view with its SRV
// names, and those answered for another service or not answered.
func (in *Inspector) Service(k resource.Key) api.DNSListing {
	l := api.DNSListing{Mesh: k.Mesh}
	o := in.opts
	t := in.srv.Table()
	obj, ok := in.cache.Peek(k) // read only
	if t == nil || !ok {
		return l
	}
	names := Extract(obj, o)
	if o.Global {
		for _, r := range names.Refused() {
			l.NotAnswered = append(l.NotAnswered, notAnswer(r))
		}
		return l
	}
	v := t.Views[k.Mesh]
	if v == nil {
		return l
	}
	for i := range names.Names {
		n := &names.Names[i]
		e, ok := v.Lookup(n.Name)
		switch {
		case !ok:
			continue // a rejection, listed below
		case e.Service != k:
			l.NotAnswered = append(l.NotAnswered, api.DNSNotAnswer{Name: n.Name, Kind: k.Kind, Service: k.Name, Source: n.Source(),
				Reason: fmt.Sprintf("the name is answered for %s (%s)", e.Service, e.Source)})
			continue
		}
		l.Names = append(l.Names, dnsName(&e))
		var seen []string
		for _, p := range names.PortsOf(n) {
			if slices.Contains(seen, p.Name) {
				continue
			}
			seen = append(seen, p.Name)
			if e, ok := v.Lookup("_" + p.Name + "._tcp." + n.Name); ok && e.Service == k {
				l.Names = append(l.Names, dnsName(&e))
			}
		}
	}
	for _, r := range v.Rejections() {
		if r.Service == k && !slices.ContainsFunc(l.NotAnswered, func(n api.DNSNotAnswer) bool { return n.Name == r.Name }) {
			l.NotAnswered = append(l.NotAnswered, api.DNSNotAnswer{Name: r.Name, Kind: k.Kind, Service: k.Name, Source: r.Source, Reason: r.Reason})
		}
	}
	return l
}

// Lookup returns the records of a fully qualified name in every mesh's
// view, ordered by mesh.
func (in *Inspector) Lookup(name string) []api.DNSMatch {
	t := in.srv.Table()
	if t == nil {
		return nil
	}
	name = strings.ToLower(name)
	var out []api.DNSMatch
	for mesh, v := range t.Views {
		if e, ok := v.Lookup(name); ok {
			out = append(out, api.DNSMatch{Mesh: mesh, Name: dnsName(&e)})
		}
	}
	slices.SortFunc(out, func(a, b api.DNSMatch) int { return strings.Compare(a.Mesh, b.Mesh) })
	return out
}

// LookupAddr returns, in each mesh, the records of the name the reverse
// name of ip points to (the service holding the VIP).
func (in *Inspector) LookupAddr(ip netip.Addr) []api.DNSMatch {
	t := in.srv.Table()
	rev, err := dns.ReverseAddr(ip.String())
	if t == nil || err != nil {
		return nil
	}
	var out []api.DNSMatch
	for mesh, v := range t.Views {
		if name, ok := v.PTR(rev); ok {
			if e, ok := v.Lookup(name); ok {
				out = append(out, api.DNSMatch{Mesh: mesh, Name: dnsName(&e)})
			}
		}
	}
	slices.SortFunc(out, func(a, b api.DNSMatch) int { return strings.Compare(a.Mesh, b.Mesh) })
	return out
}

// Match calls fn with the service of every name of the table that
// contains word, in its name or its addresses. SRV names are skipped: the
// name they point to is in the table too, for the same service.
func (in *Inspector) Match(word string, fn func(resource.Key)) {
	t := in.srv.Table()
	if t == nil {
		return
	}
	var buf []byte
	w := []byte(word)
	// Only a word of hexadecimal digits, dots and colons can be part of an
	// address: spare the others formatting every address.
	addrs := strings.Trim(word, "0123456789abcdef.:") == ""
	for _, v := range t.Views {
		for e := range v.Entries() {
			if strings.HasPrefix(e.Name, "_") {
				continue
			}
			if strings.Contains(e.Name, word) {
				fn(e.Service)
				continue
			}
			if !addrs {
				continue
			}
			for _, ips := range [][]netip.Addr{e.A, e.AAAA} {
				for _, ip := range ips {
					if buf = ip.AppendTo(buf[:0]); bytes.Contains(buf, w) {
						fn(e.Service)
					}
				}
			}
		}
	}
}
