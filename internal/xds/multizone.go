package xds

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// SNI is the server name a proxy sends to another zone's ZoneIngress for
// port of the service name (its name in its own zone; namespace on
// Kubernetes) of mesh in zone, and the name that ingress matches:
//
//	<name>[.<namespace>].<port>.<zone>.<mesh>.mesh
//
// When that is no valid DNS name (a label over 63 bytes, more than 253
// in all), it is h<hash>.<port>.mesh, the hash of the same parts, so both
// sides still compute the same name.
func SNI(mesh, zone, name, namespace string, port int) string {
	parts := []string{name}
	if namespace != "" {
		parts = append(parts, namespace)
	}
	parts = append(parts, strconv.Itoa(port), zone, mesh, "mesh")
	sni := strings.Join(parts, ".")
	if len(sni) <= 253 && !slicesAny(strings.Split(sni, "."), func(l string) bool { return len(l) > 63 || l == "" }) {
		return sni
	}
	h := sha256.New()
	for _, p := range []string{mesh, zone, name, namespace} {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return "h" + hex.EncodeToString(h.Sum(nil))[:32] + "." + strconv.Itoa(port) + ".mesh"
}

func slicesAny(xs []string, f func(string) bool) bool {
	for _, x := range xs {
		if f(x) {
			return true
		}
	}
	return false
}

// member names a MeshService as a MeshMultiZoneService's status does:
// its mesh, zone, name in its zone, namespace.
type member struct {
	mesh, zone, name, namespace string
}

// memberOf is how a MeshService object is named as a member.
func (b *Builder) memberOf(o *resource.Object) member {
	zone, ok := o.Labels[resource.LabelZone]
	if !ok {
		zone = b.zone
	}
	name := o.Labels[resource.LabelDisplayName]
	if name == "" {
		name = o.Name
	}
	return member{mesh: o.Mesh, zone: zone, name: name, namespace: o.Labels[resource.LabelNamespace]}
}

// zoneIndex is what the builder keeps to follow services across zones:
// the endpoints of local MeshServices (members of multi-zone services),
// which multi-zone services each member feeds, and which services use
// the ingresses of each zone. Builder goroutine only.
type zoneIndex struct {
	local   map[resource.Key]map[int][]Endpoint
	feeds   map[member]set[resource.Key]
	members map[resource.Key][]member
	byZone  map[string]set[resource.Key]
	zoneOf  map[resource.Key]set[string]
}

func newZoneIndex() *zoneIndex {
	return &zoneIndex{
		local: map[resource.Key]map[int][]Endpoint{}, feeds: map[member]set[resource.Key]{},
		members: map[resource.Key][]member{}, byZone: map[string]set[resource.Key]{}, zoneOf: map[resource.Key]set[string]{},
	}
}

// setMembers records the members of the multi-zone service k.
func (z *zoneIndex) setMembers(k resource.Key, ms []member) {
	for _, m := range z.members[k] {
		delete(z.feeds[m], k)
		if len(z.feeds[m]) == 0 {
			delete(z.feeds, m)
		}
	}
	if len(ms) == 0 {
		delete(z.members, k)
		return
	}
	z.members[k] = ms
	for _, m := range ms {
		if z.feeds[m] == nil {
			z.feeds[m] = set[resource.Key]{}
		}
		z.feeds[m].add(k)
	}
}

// useZones records the zones whose ingresses the service k's endpoints
// come from.
func (z *zoneIndex) useZones(k resource.Key, zones set[string]) {
	for zone := range z.zoneOf[k] {
		delete(z.byZone[zone], k)
	}
	if len(zones) == 0 {
		delete(z.zoneOf, k)
		return
	}
	z.zoneOf[k] = zones
	for zone := range zones {
		if z.byZone[zone] == nil {
			z.byZone[zone] = set[resource.Key]{}
		}
		z.byZone[zone].add(k)
	}
}

func (z *zoneIndex) forget(k resource.Key) {
	delete(z.local, k)
	z.setMembers(k, nil)
	z.useZones(k, nil)
}

// ingresses returns where other zones reach zone's ZoneIngresses: their
// advertised address and port (else address and port). An address that is
// a DNS name is left out: endpoints are IP addresses.
func (b *Builder) ingresses(zone string) []netip.AddrPort {
	if b.IngressesOf != nil {
		return b.IngressesOf(b.cache, zone)
	}
	var out []netip.AddrPort
	b.cache.Scan(cache.Query{Kind: resource.ZoneIngress, Labels: map[string]string{resource.LabelZone: zone}}, func(o *resource.Object) {
		addr, port := o.Spec.(*resource.ZoneIngressSpec).Reachable()
		if a, err := netip.ParseAddr(addr); err == nil {
			out = append(out, netip.AddrPortFrom(a, uint16(port)))
		}
	})
	return out
}

// ingressChanged records the zone of the ZoneIngress k, and returns it
// ("" for a deleted ingress never seen).
func (b *Builder) ingressChanged(k resource.Key) string {
	if o, ok := b.cache.Peek(k); ok {
		zone := o.Labels[resource.LabelZone]
		b.ingressZones[k] = zone
		return zone
	}
	zone := b.ingressZones[k]
	delete(b.ingressZones, k)
	return zone
}

// remoteEndpoints are the endpoints of port of a service of another
// zone: that zone's ingresses, each with the SNI it matches.
func (b *Builder) remoteEndpoints(m member, port int, priority uint32) []Endpoint {
	var out []Endpoint
	for _, a := range b.ingresses(m.zone) {
		out = append(out, Endpoint{Addr: a, Zone: m.zone, Priority: priority, SNI: SNI(m.mesh, m.zone, m.name, m.namespace, port)})
	}
	return out
}

// multiZone fills s, a MeshMultiZoneService, from its status: its ports,
// and per port the endpoints of every matched MeshService, local ones at
// priority 0 and other zones' ingresses at priority 1 (locality-aware
// failover, seed 002).
func (b *Builder) multiZone(st *meshState, o *resource.Object, s *Service) {
	status, _ := o.Status.(*resource.MultiZoneServiceStatus)
	k := o.Key()
	if status == nil {
		st.zones.forget(k)
		return
	}
	for _, p := range status.Ports {
		s.Ports = append(s.Ports, Port{Port: p.Port, Name: p.Name, Protocol: p.AppProtocol})
	}
	var members []member
	zones := set[string]{}
	s.Endpoints = map[int][]Endpoint{}
	for _, ref := range status.MeshServices {
		m := member{mesh: ref.Mesh, zone: ref.Zone, name: ref.Name, namespace: ref.Namespace}
		if m.mesh == "" {
			m.mesh = o.Mesh
		}
		if m.zone == "" {
			m.zone = b.zone
		}
		members = append(members, m)
		for _, p := range s.Ports {
			if m.zone == b.zone {
				if lk, ok := b.findLocal(m); ok {
					s.Endpoints[p.Port] = append(s.Endpoints[p.Port], st.zones.local[lk][p.Port]...)
				}
				continue
			}
			zones.add(m.zone)
			s.Endpoints[p.Port] = append(s.Endpoints[p.Port], b.remoteEndpoints(m, p.Port, 1)...)
		}
	}
	st.zones.setMembers(k, members)
	st.zones.useZones(k, zones)
	s.NoEndpoints = "none of the matched MeshServices has a Ready endpoint here, and no ZoneIngress of their zones with an IP address is known"
}

// findLocal finds the local MeshService a member names.
func (b *Builder) findLocal(m member) (resource.Key, bool) {
	labels := map[string]string{resource.LabelDisplayName: m.name}
	if m.namespace != "" {
		labels[resource.LabelNamespace] = m.namespace
	}
	var found resource.Key
	ok := false
	b.cache.Scan(cache.Query{Kind: resource.MeshService, Mesh: m.mesh, Labels: labels, Unordered: true}, func(o *resource.Object) {
		if !ok && b.local(o) {
			found, ok = o.Key(), true
		}
	})
	if !ok {
		if o, exists := b.cache.Peek(resource.Key{Kind: resource.MeshService, Mesh: m.mesh, Name: m.name}); exists && b.local(o) {
			return o.Key(), true
		}
	}
	return found, ok
}
