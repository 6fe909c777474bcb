package dnsserver

import (
	"net/netip"
	"slices"
	"strings"

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
	Sources cowMap[netip.Addr, string]
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
	// ports of a name give its SRV names (see View.Lookup).
	ports []SRVPort
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
	Created int64 // UnixNano: only the instant orders services
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
	t := &Table{TTL: o.TTL, Views: map[string]*View{}, Sources: newCowMap[netip.Addr, string](hashAddr)}
	for _, d := range o.Domains {
		t.Zones = append(t.Zones, dns.Fqdn(strings.ToLower(d)))
	}
	return t
}

// Sources maps Dataplane addresses to meshes. The oldest Dataplane wins an
// address shared across meshes (a misconfiguration).
func Sources(dataplanes []*resource.Object) cowMap[netip.Addr, string] {
	changes := make(map[resource.Key]*resource.Object, len(dataplanes))
	for _, dp := range dataplanes {
		changes[dp.Key()] = dp
	}
	return newSourceIndex().apply(changes)
}

// BuildView computes the view of the services of one mesh. Each name goes
// to the service with the best claim: by source (hostname, InternalVIP
// value, service-tag name, alias), then the oldest service; the others are
// rejected with the winner named. Each address points (PTR) at the first
// name its service is answered for.
func BuildView(svcs []ServiceNames) *View {
	changes := make(map[resource.Key]*ServiceNames, len(svcs))
	for _, s := range svcs {
		changes[s.Key] = &s
	}
	return newMeshIndex().apply(changes)
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
	out := ServiceNames{Key: svc.Key(), Created: svc.CreationTime.UnixNano()}
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
	out.VIPs = make([]netip.Addr, 0, len(st.VIPs))
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
	if len(general) == 0 || len(byHost) == 0 {
		// Every VIP (nearly always): share the one slice.
		general = out.VIPs
	}
	// IPv4 first: the view answers A and AAAA from sub-slices.
	general = v4First(general)
	for h, addrs := range byHost {
		byHost[h] = v4First(addrs)
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

// v4First orders addrs with its IPv4 addresses first, each family in its
// own order; addrs itself when it already is.
func v4First(addrs []netip.Addr) []netip.Addr {
	a, aaaa := splitFamilies(addrs)
	if len(a) == 0 || len(aaaa) == 0 || &a[0] == &addrs[0] {
		return addrs
	}
	return append(a, aaaa...)
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
