package dnsserver

import (
	"fmt"
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

// Sources of names: the origin of the address in status.addresses that
// gives the name. Every name is decided by the hostnames controller, in one
// table of names per mesh (internal/hostname), which writes each service's
// outcome into its status: DNS publishes that decision and makes none of
// its own.
const (
	SourceHostname    = "hostname"    // origin HostnameGenerator
	SourceInternalVIP = "internalVIP" // origin MeshExternalService
	SourceServiceTag  = "serviceTag"  // origin ServiceTag
	SourceAlias       = "alias"       // origin ServiceTagAlias
)

// source is a source of names as the index keeps it, in a byte: a Name
// holds one, and a Kubernetes Service has four names.
type source uint8

const (
	srcHostname source = iota
	srcInternalVIP
	srcServiceTag
	srcAlias
)

var sourceNames = [...]string{srcHostname: SourceHostname, srcInternalVIP: SourceInternalVIP, srcServiceTag: SourceServiceTag, srcAlias: SourceAlias}

func (s source) String() string { return sourceNames[s] }

// hasPorts reports whether names of source s get SRV records from their
// service's ports: hostnames and service-tag names do, aliases and
// InternalVIP values do not.
func (s source) hasPorts() bool { return s == srcHostname || s == srcServiceTag }

// sourceOf is the source of a name of status.addresses with origin kind k.
// A kind this version does not know (one a newer leader wrote) names the
// service as a whole, as a hostname does.
func sourceOf(k string) source {
	switch k {
	case resource.OriginInternalVIP:
		return srcInternalVIP
	case resource.OriginServiceTag:
		return srcServiceTag
	case resource.OriginServiceTagAlias:
		return srcAlias
	}
	return srcHostname
}

// TableOptions are the settings a table is built with.
type TableOptions struct {
	TTL     uint32
	Domains []string
	// Global is set on a global control plane, which answers no
	// service's names (GlobalAnswersNoNames).
	Global bool
}

// ServiceNames is what one service contributes to its mesh's view: the
// names it wants, in order, with their addresses. It is the compact form
// the builder keeps per service.
type ServiceNames struct {
	Key     resource.Key
	Created int64 // UnixNano: only the instant orders services
	// Revision is the store revision of the status the names come from:
	// of two services showing one name Available, the later decision
	// holds it (meshIndex).
	Revision int64
	Names    []Name
	// VIPs are all the service's addresses (for PTR records).
	VIPs []netip.Addr
	// Ports are the service's named ports, which give its hostnames and
	// service-tag names SRV records (source.hasPorts), kept once rather
	// than with each name.
	Ports []SRVPort
	// rare holds what few services have, so that the others do not pay
	// for it: nil for nearly every service.
	rare *rareNames
}

// rareNames are the parts of a service's names that few services have.
type rareNames struct {
	// refused are the names the service would have that DNS cannot
	// answer, with the reason.
	refused []Rejection
	// addrs are the addresses of the names answered with something else
	// than the service's VIPs in order (Name.addrs): those of its
	// InternalVIP values, or its VIPs IPv4 first when they are not.
	addrs [][]netip.Addr
}

// Refused returns the names the service would have that DNS cannot
// answer, with the reason.
func (s *ServiceNames) Refused() []Rejection {
	if s.rare == nil {
		return nil
	}
	return s.rare.refused
}

// Name is one name a service wants. A service has one for each of its
// names, so it is kept to 24 bytes: its source in a byte, its addresses
// its service's (ServiceNames.AddrsOf) and its SRV ports too
// (ServiceNames.PortsOf).
type Name struct {
	Name string // lower case, fully qualified
	src  source
	// addrs is 0 for a name answered with its service's VIPs (IPv4
	// first), the place in rareNames.addrs plus one otherwise.
	addrs uint32
}

// Source says where the name comes from (SourceHostname and the others).
func (n *Name) Source() string { return n.src.String() }

// AddrsOf returns the addresses n, a name of s, is answered with, IPv4
// first.
func (s *ServiceNames) AddrsOf(n *Name) []netip.Addr {
	if n.addrs == 0 {
		return s.VIPs
	}
	return s.rare.addrs[n.addrs-1]
}

// PortsOf returns the ports whose names give n, a name of s, SRV records:
// s's, for a hostname or a service-tag name; none for the others.
func (s *ServiceNames) PortsOf(n *Name) []SRVPort {
	if n.src.hasPorts() {
		return s.Ports
	}
	return nil
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

// BuildView computes the view of the services of one mesh: each name
// listed Available in one service's status is answered for it (see
// meshIndex for two services showing one name while a status lags). Each
// address points (PTR) at the first name its service is answered for.
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

// Extract lists the names a service is answered for, with their
// addresses, in status order: the names the hostnames controller lists
// Available in its status.addresses - generated hostnames, service-tag
// names and their aliases (seed 004), all on the service's own VIPs, and
// InternalVIP values (origin MeshExternalService) on the VIPs allocated
// for each; InternalVIP values the service holds come after the others.
// A name listed NotAvailable is Refused with the controller's reason, as
// is a name that is not a valid DNS name (a label over 63 bytes, say, in a
// status an older version wrote), or that has no address to answer with.
func Extract(svc *resource.Object, o TableOptions) ServiceNames {
	out := ServiceNames{Key: svc.Key(), Created: svc.CreationTime.UnixNano(), Revision: svc.Revision}
	st := serviceStatus(svc)
	var specPorts []resource.Port
	switch spec := svc.Spec.(type) {
	case *resource.MeshServiceSpec:
		specPorts = spec.Ports
	case *resource.MeshMultiZoneServiceSpec:
		specPorts = spec.Ports
	}
	for _, p := range specPorts {
		if p.Name != "" {
			out.Ports = append(out.Ports, SRVPort{Name: strings.ToLower(p.Name), Port: uint16(p.Port)})
		}
	}
	// Addresses of the service as a whole: the VIPs that belong to no
	// InternalVIP hostname.
	var general []netip.Addr
	byHost := map[string][]netip.Addr{}
	var statusVIPs []resource.VIP
	if st != nil {
		statusVIPs = st.VIPs
	}
	out.VIPs = make([]netip.Addr, 0, len(statusVIPs))
	for _, v := range statusVIPs {
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
	if len(byHost) == 0 {
		// Every VIP (nearly always): share the one slice.
		general = out.VIPs
	}
	// IPv4 first: the view answers A and AAAA from sub-slices.
	general = v4First(general)
	for h, addrs := range byHost {
		byHost[h] = v4First(addrs)
	}
	noVIP := noVIPReason(svc, o)
	var rare rareNames
	add := func(name string, src source, addrs []netip.Addr) {
		switch {
		case o.Global:
			rare.refused = append(rare.refused, Rejection{Name: name, Service: out.Key, Source: src.String(), Reason: GlobalAnswersNoNames})
		case len(addrs) == 0:
			rare.refused = append(rare.refused, Rejection{Name: name, Service: out.Key, Source: src.String(), Reason: noVIP})
		default:
			if why := checkName(name); why != "" {
				rare.refused = append(rare.refused, Rejection{Name: name, Service: out.Key, Source: src.String(), Reason: why})
				return
			}
			n := Name{Name: name, src: src}
			if !sameSlice(addrs, out.VIPs) {
				i := slices.IndexFunc(rare.addrs, func(a []netip.Addr) bool { return sameSlice(a, addrs) })
				if i < 0 {
					i = len(rare.addrs)
					rare.addrs = append(rare.addrs, addrs)
				}
				n.addrs = uint32(i + 1)
			}
			out.Names = append(out.Names, n)
		}
	}
	held := map[string]bool{} // InternalVIP values this service holds
	if st != nil {
		for _, a := range st.Addresses {
			if a.Hostname == "" {
				continue
			}
			name := dns.Fqdn(strings.ToLower(a.Hostname))
			src := sourceOf(a.Origin.Kind)
			switch {
			case a.Status != resource.AddressAvailable:
				rare.refused = append(rare.refused, Rejection{Name: name, Service: out.Key, Source: src.String(), Reason: a.Reason})
			case src == srcInternalVIP:
				held[name] = true
				if _, ok := byHost[name]; !ok {
					add(name, srcInternalVIP, nil)
				}
			default:
				add(name, src, general)
			}
		}
	}
	for _, h := range slices.Sorted(mapKeys(byHost)) {
		if held[h] {
			add(h, srcInternalVIP, byHost[h])
		}
	}
	if len(rare.refused) > 0 || len(rare.addrs) > 0 {
		out.rare = &rare
	}
	return out
}

// sameSlice reports whether a and b are the same slice: the same
// elements of the same array.
func sameSlice(a, b []netip.Addr) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// GlobalAnswersNoNames is why a global control plane answers none of a
// service's names. The VIPs in the statuses it holds are the origin
// zones': each zone allocates its own, for its own DNS, from the same
// pools, so on the global ten zones' services share each address and
// every zone's "redis" claims the same local name. Answering them would
// tell a client an address that means something only inside one zone.
const GlobalAnswersNoNames = "a global control plane answers no service names: each zone answers its own services and those it receives, with the VIPs it allocated"

// noVIPReason says why svc has no address to answer its names with.
func noVIPReason(svc *resource.Object, o TableOptions) string {
	if st := serviceStatus(svc); st != nil {
		for _, c := range st.Conditions {
			if c.Type == resource.ConditionVIPsAllocated && c.Status == resource.ConditionFalse {
				return "the service has no VIP: " + c.Message
			}
		}
	}
	return "the service has no VIP yet (the leader allocates one within milliseconds of the change)"
}

// checkName says why name cannot be answered over DNS, or "" when it can:
// each label at most 63 bytes and the whole name at most 253 (RFC 1035).
func checkName(name string) string {
	if len(strings.TrimSuffix(name, ".")) > 253 {
		return fmt.Sprintf("not a valid DNS name: %d bytes, more than 253", len(strings.TrimSuffix(name, ".")))
	}
	for _, l := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		switch {
		case l == "":
			return "not a valid DNS name: an empty label"
		case len(l) > 63:
			return fmt.Sprintf("not a valid DNS name: the label %q has %d bytes, more than 63", l, len(l))
		}
	}
	if _, ok := dns.IsDomainName(name); !ok {
		return "not a valid DNS name"
	}
	return ""
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
