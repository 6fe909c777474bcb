package dnsserver

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/hostname"
	"github.com/meshnames/meshnames/internal/resource"
)

// Helpers shared by the tests of this package: services and Dataplanes
// built in code, and a deterministic text form of a table.

// t0 is the creation time of the oldest object in tests; objects are
// created "age" minutes after it.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testOpts are the defaults of the configuration (dns.domains) with a TTL
// that is easy to spot.
var testOpts = TableOptions{TTL: 10, Domains: []string{"mesh.local", "mesh"}}

type svcOpt func(*resource.Object)

// svc returns a service of kind in mesh, created minute minutes after t0,
// with an empty status that the options fill.
func svc(kind resource.Kind, mesh, name string, minute int, opts ...svcOpt) *resource.Object {
	o := &resource.Object{Kind: kind, Mesh: mesh, Name: name, CreationTime: t0.Add(time.Duration(minute) * time.Minute)}
	switch kind {
	case resource.MeshService:
		o.Spec, o.Status = &resource.MeshServiceSpec{}, &resource.ServiceStatus{}
	case resource.MeshExternalService:
		o.Spec, o.Status = &resource.MeshExternalServiceSpec{}, &resource.ServiceStatus{}
	case resource.MeshMultiZoneService:
		o.Spec, o.Status = &resource.MeshMultiZoneServiceSpec{}, &resource.MultiZoneServiceStatus{}
	default:
		panic("svc: not a service kind: " + kind)
	}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

func status(o *resource.Object) *resource.ServiceStatus {
	return o.Status.(resource.ServiceStatusOf).Service()
}

// revision sets the revision of the service's last write.
func revision(r int64) svcOpt {
	return func(o *resource.Object) { o.Revision = r }
}

// hosts adds Available generated hostnames.
func hosts(hs ...string) svcOpt {
	return func(o *resource.Object) {
		for _, h := range hs {
			status(o).Addresses = append(status(o).Addresses, resource.Address{Hostname: h, Status: resource.AddressAvailable,
				Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "gen"}})
		}
	}
}

// lostHosts adds NotAvailable generated hostnames (held by another service).
func lostHosts(hs ...string) svcOpt {
	return func(o *resource.Object) {
		for _, h := range hs {
			status(o).Addresses = append(status(o).Addresses, resource.Address{Hostname: h, Status: resource.AddressNotAvailable,
				Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "gen"}, Reason: "taken"})
		}
	}
}

// vips adds VIPs of the service as a whole.
func vips(ips ...string) svcOpt {
	return func(o *resource.Object) {
		for _, ip := range ips {
			status(o).VIPs = append(status(o).VIPs, resource.VIP{IP: ip, Type: resource.VIPKuma})
		}
	}
}

// internalVIP adds a MeshExternalService InternalVIP match, its VIPs and
// its Available address, as the vips and hostnames controllers write them.
func internalVIP(host string, ips ...string) svcOpt {
	return internalVIPWith(host, resource.AddressAvailable, ips...)
}

// lostInternalVIP adds an InternalVIP match whose value another service
// holds: it has its VIPs, and its address is NotAvailable.
func lostInternalVIP(host string, ips ...string) svcOpt {
	return internalVIPWith(host, resource.AddressNotAvailable, ips...)
}

// pendingInternalVIP adds an InternalVIP match with its VIPs but no address
// yet (the hostnames controller has not seen it).
func pendingInternalVIP(host string, ips ...string) svcOpt {
	return internalVIPWith(host, "", ips...)
}

func internalVIPWith(host, state string, ips ...string) svcOpt {
	return func(o *resource.Object) {
		spec := o.Spec.(*resource.MeshExternalServiceSpec)
		spec.Match = append(spec.Match, resource.ExternalMatch{Type: resource.MatchInternalVIP, Value: host, Port: 443, Protocol: resource.ProtocolTCP})
		for _, ip := range ips {
			status(o).VIPs = append(status(o).VIPs, resource.VIP{IP: ip, Type: resource.VIPKuma, Hostname: host})
		}
		if state != "" {
			status(o).Addresses = append(status(o).Addresses, resource.Address{Hostname: host, Status: state,
				Origin: resource.AddressOrigin{Kind: resource.OriginInternalVIP, Name: o.Name}})
		}
	}
}

// ports sets the service's ports from "name:port" or "port".
func ports(ps ...string) svcOpt {
	return func(o *resource.Object) {
		var out []resource.Port
		for _, p := range ps {
			var rp resource.Port
			name, num, ok := strings.Cut(p, ":")
			if !ok {
				name, num = "", p
			}
			rp.Name = name
			if _, err := fmt.Sscan(num, &rp.Port); err != nil {
				panic(err)
			}
			rp.AppProtocol = resource.ProtocolTCP
			out = append(out, rp)
		}
		switch spec := o.Spec.(type) {
		case *resource.MeshServiceSpec:
			spec.Ports = out
		case *resource.MeshMultiZoneServiceSpec:
			spec.Ports = out
		default:
			panic("ports: kind without ports")
		}
	}
}

// tags adds ServiceTag identities (seed 004) to a MeshService, and their
// names under the domain mesh to its status.addresses, Available, as the
// hostnames controller writes them for a service that holds them all.
func tags(ts ...string) svcOpt {
	return func(o *resource.Object) {
		spec := o.Spec.(*resource.MeshServiceSpec)
		for _, t := range ts {
			spec.Identities = append(spec.Identities, resource.Identity{Type: resource.IdentityServiceTag, Value: t})
		}
		for _, n := range hostname.ServiceTagNames(ts, "mesh") {
			status(o).Addresses = append(status(o).Addresses, tagAddress(n, resource.AddressAvailable, ""))
		}
	}
}

// lost marks the addresses of hosts in the service's status NotAvailable,
// with the reason "taken", as the hostnames controller writes the names
// another service holds. Apply it after the options that add them.
func lost(hosts ...string) svcOpt {
	return func(o *resource.Object) {
		for i, a := range status(o).Addresses {
			if slices.Contains(hosts, a.Hostname) {
				status(o).Addresses[i].Status, status(o).Addresses[i].Reason = resource.AddressNotAvailable, "taken"
			}
		}
	}
}

func tagAddress(n hostname.TagName, state, reason string) resource.Address {
	origin := resource.AddressOrigin{Kind: resource.OriginServiceTag, Name: n.Tag}
	if n.Alias {
		origin.Kind = resource.OriginServiceTagAlias
	}
	return resource.Address{Hostname: n.Host, Status: state, Origin: origin, Reason: reason}
}

// dataplane returns a Dataplane at addr.
func dataplane(mesh, name string, minute int, addr string) *resource.Object {
	return &resource.Object{Kind: resource.Dataplane, Mesh: mesh, Name: name, CreationTime: t0.Add(time.Duration(minute) * time.Minute),
		Spec: &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{Address: addr,
			Inbound: []resource.Inbound{{Port: 8080, Tags: map[string]string{"kuma.io/service": name}}}}}}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// render writes a table as text, deterministically: zones, TTL, sources,
// then per mesh every name with its records, the empty non-terminals, the
// PTR records and the rejected names, all sorted.
func render(t *Table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ttl %d\nzones %s\n", t.TTL, strings.Join(t.Zones, " "))
	for _, ip := range slices.SortedFunc(mapKeysAddr(sourcesOf(t)), netip.Addr.Compare) {
		fmt.Fprintf(&b, "source %s -> mesh %s\n", ip, sourcesOf(t)[ip])
	}
	for _, mesh := range slices.Sorted(mapKeys(t.Views)) {
		v := t.Views[mesh]
		fmt.Fprintf(&b, "\nview %s\n", mesh)
		for _, n := range slices.Sorted(mapKeys(namesOf(v))) {
			e := namesOf(v)[n]
			if e.Name != n {
				fmt.Fprintf(&b, "  !! key %s holds entry %s\n", n, e.Name)
			}
			fmt.Fprintf(&b, "  %s  [%s %s]\n", n, e.Service, e.Source)
			for _, ip := range e.A {
				fmt.Fprintf(&b, "    A %s\n", ip)
			}
			for _, ip := range e.AAAA {
				fmt.Fprintf(&b, "    AAAA %s\n", ip)
			}
			for _, s := range e.SRV {
				fmt.Fprintf(&b, "    SRV %d %s\n", s.Port, s.Target)
			}
		}
		for _, n := range slices.Sorted(mapKeys(parentsOf(v))) {
			fmt.Fprintf(&b, "  parent %s\n", n)
		}
		for _, r := range slices.Sorted(mapKeys(ptrOf(v))) {
			fmt.Fprintf(&b, "  PTR %s -> %s\n", r, ptrOf(v)[r])
		}
		for _, r := range v.Rejections() {
			fmt.Fprintf(&b, "  rejected %s  [%s %s]: %s\n", r.Name, r.Service, r.Source, r.Reason)
		}
	}
	return b.String()
}

// namesOf is every name of v with its records, SRV names included, as
// plain entries.
func namesOf(v *View) map[string]*Entry {
	out := map[string]*Entry{}
	for e := range v.Entries() {
		c := *e
		c.ports = nil
		out[e.Name] = &c
	}
	return out
}

func parentsOf(v *View) map[string]struct{} {
	out := map[string]struct{}{}
	for p := range v.Parents() {
		out[p] = struct{}{}
	}
	return out
}

func ptrOf(v *View) map[string]string { return maps.Collect(v.PTRs()) }

func sourcesOf(t *Table) map[netip.Addr]string { return maps.Collect(t.Sources.All()) }

func mapKeysAddr[V any](m map[netip.Addr]V) func(func(netip.Addr) bool) {
	return func(yield func(netip.Addr) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
