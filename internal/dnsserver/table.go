package dnsserver

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/resource"
)

// Table is what the DNS server answers from: one view per mesh, and the
// mesh of each Dataplane address. It is immutable once built; the server
// swaps in a new one when something changes.
type Table struct {
	TTL uint32
	// Zones are the authoritative domains, lower case, fully qualified.
	Zones []string
	Views map[string]*View
	// Sources maps a Dataplane address to its mesh (per-mesh views).
	Sources map[netip.Addr]string
}

// View holds the names of one mesh.
type View struct {
	// Names by lower case fully qualified name.
	Names map[string]*Entry
	// Parents are the names that own no record but have names below them
	// (empty non-terminals such as svc.mesh.local. or _tcp.web.mesh.):
	// they exist, so they get NODATA rather than NXDOMAIN, which resolvers
	// take for "no name below" (RFC 8020, QNAME minimisation).
	Parents map[string]struct{}
	// PTR maps reverse names (7.0.0.241.in-addr.arpa.) to a service's
	// first hostname.
	PTR map[string]string
	// Rejected are names a service would have but does not get.
	Rejected []Rejection
}

// Entry is the records of one name.
type Entry struct {
	Name    string // as generated (lower case, fully qualified)
	Service resource.Key
	// Source says where the name comes from: hostname, internalVIP,
	// serviceTag or alias.
	Source string
	A      []netip.Addr
	AAAA   []netip.Addr
	SRV    []SRV
}

// SRV is one service record: the target host and port.
type SRV struct {
	Target string
	Port   uint16
}

// Rejection is a name that is not answered, and why.
type Rejection struct {
	Name    string
	Service resource.Key
	Source  string
	Reason  string
}

// Sources of names, in precedence order: an InternalVIP value beats a
// generated hostname, as in the hostnames controller, which already makes
// both unique per mesh (the rank only decides while one status lags behind
// another); they beat a service-tag name, which beats its aliases.
const (
	SourceHostname    = "hostname"
	SourceInternalVIP = "internalVIP"
	SourceServiceTag  = "serviceTag"
	SourceAlias       = "alias"
)

var sourceRank = map[string]int{SourceInternalVIP: 0, SourceHostname: 1, SourceServiceTag: 2, SourceAlias: 3}

// TableOptions are the settings a table is built with.
type TableOptions struct {
	TTL              uint32
	Domains          []string
	ServiceTagDomain string
}

// ServiceNames is what one service contributes to its mesh's view: the
// names it wants, in order, with their addresses. It is the compact form
// the builder keeps per service.
type ServiceNames struct {
	Key     resource.Key
	Created time.Time
	Names   []Name
	// VIPs are all the service's addresses (for PTR records).
	VIPs []netip.Addr
}

// Name is one name a service wants.
type Name struct {
	Name   string // lower case, fully qualified
	Source string
	Addrs  []netip.Addr
	// Ports with a name get SRV records (not for aliases).
	Ports []SRVPort
}

// SRVPort is a named port.
type SRVPort struct {
	Name string
	Port uint16
}

// Build computes a table from the services (MeshService,
// MeshExternalService, MeshMultiZoneService) and Dataplanes given. It is
// pure and deterministic: the same objects give the same table.
func Build(objs []*resource.Object, o TableOptions) *Table {
	t := NewTable(o)
	byMesh := map[string][]ServiceNames{}
	var dataplanes []*resource.Object
	for _, obj := range objs {
		switch obj.Kind {
		case resource.Dataplane:
			dataplanes = append(dataplanes, obj)
		case resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService:
			byMesh[obj.Mesh] = append(byMesh[obj.Mesh], Extract(obj, o))
		}
	}
	for mesh, svcs := range byMesh {
		t.Views[mesh] = BuildView(svcs)
	}
	t.Sources = Sources(dataplanes)
	return t
}

// NewTable returns a table with no names.
func NewTable(o TableOptions) *Table {
	t := &Table{TTL: o.TTL, Views: map[string]*View{}, Sources: map[netip.Addr]string{}}
	for _, d := range o.Domains {
		t.Zones = append(t.Zones, dns.Fqdn(strings.ToLower(d)))
	}
	return t
}

// Sources maps Dataplane addresses to meshes. The oldest Dataplane wins an
// address shared across meshes (a misconfiguration).
func Sources(dataplanes []*resource.Object) map[netip.Addr]string {
	dataplanes = slices.Clone(dataplanes)
	slices.SortFunc(dataplanes, func(a, b *resource.Object) int {
		return cmp.Or(a.CreationTime.Compare(b.CreationTime), cmp.Compare(a.Mesh, b.Mesh), cmp.Compare(a.Name, b.Name))
	})
	out := map[netip.Addr]string{}
	for _, dp := range dataplanes {
		ip, err := netip.ParseAddr(dp.Spec.(*resource.DataplaneSpec).Networking.Address)
		if err != nil {
			continue // a DNS name: queries come from addresses
		}
		if _, taken := out[ip]; !taken {
			out[ip] = dp.Mesh
		}
	}
	return out
}

// BuildView computes the view of the services of one mesh.
func BuildView(svcs []ServiceNames) *View {
	svcs = slices.Clone(svcs)
	slices.SortFunc(svcs, func(a, b ServiceNames) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Key.Kind, b.Key.Kind), cmp.Compare(a.Key.Name, b.Key.Name))
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
	// Precedence: source, then the older service (svcs are sorted, and
	// the sort is stable).
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(sourceRank[a.n.Source], sourceRank[b.n.Source]) })
	v := &View{Names: make(map[string]*Entry, len(cands)), PTR: map[string]string{}}
	for _, c := range cands {
		key := svcs[c.svc].Key
		if prev, taken := v.Names[c.n.Name]; taken {
			// A name the service already holds under another source (its
			// hostname equal to its own alias) is answered: not rejected.
			if prev.Service != key {
				v.Rejected = append(v.Rejected, Rejection{Name: c.n.Name, Service: key, Source: c.n.Source,
					Reason: fmt.Sprintf("the name is answered for %s (%s)", prev.Service, prev.Source)})
			}
			continue
		}
		e := &Entry{Name: c.n.Name, Service: key, Source: c.n.Source}
		for _, a := range c.n.Addrs {
			if a.Is4() {
				e.A = append(e.A, a)
			} else {
				e.AAAA = append(e.AAAA, a)
			}
		}
		v.Names[c.n.Name] = e
		for _, p := range c.n.Ports {
			srvName := "_" + p.Name + "._tcp." + c.n.Name
			if _, taken := v.Names[srvName]; !taken {
				v.Names[srvName] = &Entry{Name: srvName, Service: key, Source: c.n.Source, SRV: []SRV{{Target: c.n.Name, Port: p.Port}}}
			}
		}
	}
	v.Parents = parents(v.Names)
	// PTR: each VIP names the first of its service's names the view answers.
	for _, svc := range svcs {
		first := ""
		for _, n := range svc.Names {
			if e, ok := v.Names[n.Name]; ok && e.Service == svc.Key {
				first = n.Name
				break
			}
		}
		if first == "" {
			continue
		}
		for _, ip := range svc.VIPs {
			if rev, err := dns.ReverseAddr(ip.String()); err == nil {
				if _, taken := v.PTR[rev]; !taken {
					v.PTR[rev] = first
				}
			}
		}
	}
	slices.SortFunc(v.Rejected, func(a, b Rejection) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Service.String(), b.Service.String()))
	})
	return v
}

// parents returns the ancestors of names that are not names themselves.
func parents(names map[string]*Entry) map[string]struct{} {
	out := map[string]struct{}{}
	for n := range names {
		for p := parent(n); p != ""; p = parent(p) {
			if _, done := out[p]; done {
				break // and so are its ancestors
			}
			if _, isName := names[p]; !isName {
				out[p] = struct{}{}
			}
		}
	}
	return out
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

func serviceStatus(obj *resource.Object) *resource.ServiceStatus {
	if st, ok := obj.Status.(resource.ServiceStatusOf); ok && st != nil {
		return st.Service()
	}
	return nil
}

// Extract lists the names a service wants, with their addresses, in
// order: generated hostnames (Available ones), InternalVIP values, then
// service-tag names and their aliases (seed 004). An InternalVIP value is
// answered once the hostnames controller lists it Available in
// status.addresses (origin MeshExternalService): a value another service
// holds is not answered for this one.
func Extract(svc *resource.Object, o TableOptions) ServiceNames {
	out := ServiceNames{Key: svc.Key(), Created: svc.CreationTime}
	st := serviceStatus(svc)
	if st == nil || len(st.VIPs) == 0 {
		return out // nothing to answer with yet
	}
	var ports []SRVPort
	var specPorts []resource.Port
	switch spec := svc.Spec.(type) {
	case *resource.MeshServiceSpec:
		specPorts = spec.Ports
	case *resource.MeshMultiZoneServiceSpec:
		specPorts = spec.Ports
	}
	for _, p := range specPorts {
		if p.Name != "" {
			ports = append(ports, SRVPort{Name: strings.ToLower(p.Name), Port: uint16(p.Port)})
		}
	}
	// Addresses of the service as a whole: the VIPs that belong to no
	// InternalVIP hostname (for a MeshExternalService with only those, all).
	var general []netip.Addr
	byHost := map[string][]netip.Addr{}
	for _, v := range st.VIPs {
		ip, err := netip.ParseAddr(v.IP)
		if err != nil {
			continue
		}
		out.VIPs = append(out.VIPs, ip)
		if v.Hostname == "" {
			general = append(general, ip)
		} else {
			h := dns.Fqdn(strings.ToLower(v.Hostname))
			byHost[h] = append(byHost[h], ip)
		}
	}
	if len(general) == 0 {
		general = out.VIPs
	}
	held := map[string]bool{} // InternalVIP values this service holds
	for _, a := range st.Addresses {
		if a.Status != resource.AddressAvailable || a.Hostname == "" {
			continue
		}
		name := dns.Fqdn(strings.ToLower(a.Hostname))
		if a.Origin.Kind == resource.OriginInternalVIP {
			held[name] = true
			continue
		}
		out.Names = append(out.Names, Name{Name: name, Source: SourceHostname, Addrs: general, Ports: ports})
	}
	for _, h := range slices.Sorted(mapKeys(byHost)) {
		if held[h] {
			out.Names = append(out.Names, Name{Name: h, Source: SourceInternalVIP, Addrs: byHost[h]})
		}
	}
	if spec, ok := svc.Spec.(*resource.MeshServiceSpec); ok && o.ServiceTagDomain != "" {
		suffix := "." + dns.Fqdn(strings.ToLower(o.ServiceTagDomain))
		for _, id := range spec.Identities {
			if id.Type != resource.IdentityServiceTag || id.Value == "" {
				continue
			}
			// seed 004: the tag itself, then the dash and dot aliases, all
			// on the same VIP.
			tag := strings.ToLower(id.Value)
			out.Names = append(out.Names, Name{Name: tag + suffix, Source: SourceServiceTag, Addrs: general, Ports: ports})
			for _, alias := range []string{strings.NewReplacer("_", "-", ".", "-").Replace(tag), strings.ReplaceAll(tag, "_", ".")} {
				if alias != tag {
					out.Names = append(out.Names, Name{Name: alias + suffix, Source: SourceAlias, Addrs: general})
				}
			}
		}
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
