package xds

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshnames/meshnames/internal/resource"
)

// Domain, IP and CIDR matches (seed 003) capture traffic the client
// sends to an address of its own choosing, not to a VIP: a transparent
// proxy hands a connection to the listener of its original destination
// address and port, or to the one on 0.0.0.0 and that port. So the
// MeshExternalServices of a mesh share one listener per port,
// outbound:extsvc:<port>, whose filter chains pick the service:
//
//   - IP and CIDR matches: the destination address (prefix_ranges);
//     Envoy takes the longest prefix that holds it;
//   - Domain matches of protocol tls: the SNI the client sends
//     (server_names, read by the tls_inspector listener filter);
//   - Domain matches of http, http2 and grpc: one chain for plain
//     traffic whose HTTP route has a virtual host per service, matched
//     on the Host header (the domain, and the domain with the port);
//   - a Domain match of protocol tcp: every connection no other chain
//     takes, since TCP carries no name (seed 003's warning).
//
// Everything else on the port goes to extsvc:passthrough:<port>, an
// ORIGINAL_DST cluster, as if nothing had captured it; for HTTP that is
// a last virtual host, "*".
//
// Two services whose matches are the same on a port (the same prefix, the
// same domain, or tcp Domain matches, and an HTTP Domain match with a tcp
// one) cannot both get the traffic, and Envoy refuses a listener whose
// chains match the same: the older service wins (creation time, then
// name), as a name is held by its oldest claim, and inspection says who
// lost to whom. Overlaps that are not equal (a prefix inside another)
// are left to Envoy's longest prefix and reported by the extsvc
// controller's Overlapping condition.

// extIndex holds the Domain, IP and CIDR matches of the served
// MeshExternalServices of a mesh, by port, and the ports whose listener
// must be rendered again. Builder goroutine only.
type extIndex struct {
	claims map[int]map[resource.Key][]claim
	ports  map[resource.Key][]int
	dirty  set[int]
}

// claim is one Domain, IP or CIDR match of a service.
type claim struct {
	svc      string
	created  time.Time
	index    int // in spec.match
	cluster  string
	typ      string
	value    string
	protocol string
}

func newExtIndex() *extIndex {
	return &extIndex{claims: map[int]map[resource.Key][]claim{}, ports: map[resource.Key][]int{}, dirty: set[int]{}}
}

// set records the matches of the MeshExternalService o; a service that
// is not served claims nothing.
func (x *extIndex) set(o *resource.Object, spec *resource.MeshExternalServiceSpec) {
	k := o.Key()
	x.forget(k)
	if notServed(spec) != "" {
		return
	}
	for i, m := range spec.Match {
		if m.Type != resource.MatchDomain && m.Type != resource.MatchIP && m.Type != resource.MatchCIDR {
			continue
		}
		port := m.Port
		if x.claims[port] == nil {
			x.claims[port] = map[resource.Key][]claim{}
		}
		if x.claims[port][k] == nil {
			x.ports[k] = append(x.ports[k], port)
		}
		x.claims[port][k] = append(x.claims[port][k], claim{svc: k.Name, created: o.CreationTime, index: i,
			cluster: ClusterName(k, m.Port), typ: m.Type, value: m.Value, protocol: m.Protocol})
		x.dirty.add(port)
	}
}

// forget drops the matches of the service k.
func (x *extIndex) forget(k resource.Key) {
	for _, port := range x.ports[k] {
		delete(x.claims[port], k)
		if len(x.claims[port]) == 0 {
			delete(x.claims, port)
		}
		x.dirty.add(port)
	}
	delete(x.ports, k)
}

// renderShared puts the listeners of the ports of mesh that changed into
// its table, marking the mesh changed when a proxy sees a difference.
func (b *Builder) renderShared(st *meshState, mesh string, changed map[string]bool) {
	for port := range st.ext.dirty {
		var rs []Resource
		var cs []claim
		for _, c := range st.ext.claims[port] {
			cs = append(cs, c...)
		}
		if len(cs) > 0 {
			rs = renderShared(port, cs)
		}
		st.t.mu.Lock()
		if st.t.put(sharedOwner(port, mesh), nil, rs) {
			changed[mesh] = true
		}
		st.t.mu.Unlock()
	}
	clear(st.ext.dirty)
}

// sharedOwner is the owner, in a mesh's table, of the listener of port
// that the mesh's external services share: a name no resource can have.
func sharedOwner(port int, mesh string) resource.Key {
	return resource.Key{Kind: resource.MeshExternalService, Mesh: mesh, Name: ":" + strconv.Itoa(port)}
}

// isShared reports whether k owns a shared listener: a proxy that may
// reach some MeshExternalService on its port gets it.
func isShared(k resource.Key) bool {
	return k.Kind == resource.MeshExternalService && strings.HasPrefix(k.Name, ":")
}

// SharedListenerName is the name of the listener the external services
// of a mesh share on port.
func SharedListenerName(port int) string { return "outbound:extsvc:" + strconv.Itoa(port) }

// passthroughName is the cluster of what the shared listener of port
// does not capture.
func passthroughName(port int) string { return "extsvc:passthrough:" + strconv.Itoa(port) }

// chains is what the claims of one port resolve to: per cluster, in
// the order of its oldest claim, the prefixes, server names and HTTP
// hosts it gets.
type chains struct {
	order    []string
	protocol map[string]string
	prefixes map[string][]netip.Prefix
	snis     map[string][]string
	hosts    map[string][]string
	tcpAll   string // the cluster of the tcp Domain match that takes the rest
	notes    []string
}

// resolve gives every prefix, server name and host to its oldest claim.
func resolve(port int, cs []claim) *chains {
	slices.SortFunc(cs, func(a, b claim) int {
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.svc, b.svc), cmp.Compare(a.index, b.index))
	})
	r := &chains{protocol: map[string]string{}, prefixes: map[string][]netip.Prefix{}, snis: map[string][]string{}, hosts: map[string][]string{}}
	taken := map[string]claim{}
	var rest *claim // the first tcp or HTTP Domain claim: who has the port's plain traffic
	lost := func(c, w claim, what string) {
		r.notes = append(r.notes, fmt.Sprintf("MeshExternalService %s: its %s match %s on port %d gets none of %s: MeshExternalService %s, which is older, takes it with its match %s",
			c.svc, c.typ, c.value, port, what, w.svc, w.value))
	}
	// take gives key to c unless an older service has it; what names the
	// traffic key stands for.
	take := func(c claim, key, what string) bool {
		w, ok := taken[key]
		if !ok {
			taken[key] = c
			return true
		}
		if w.svc != c.svc {
			lost(c, w, what)
		}
		return false
	}
	for _, c := range cs {
		name := strings.ToLower(c.value)
		switch {
		case c.typ != resource.MatchDomain:
			p, ok := prefixOf(c)
			if !ok || !take(c, "ip "+p.String(), "the addresses "+p.String()) {
				continue // taken, or stored under older rules
			}
			r.prefixes[c.cluster] = append(r.prefixes[c.cluster], p)
		case c.protocol == resource.ProtocolTLS:
			if !take(c, "sni "+name, "TLS to "+c.value) {
				continue
			}
			r.snis[c.cluster] = append(r.snis[c.cluster], name)
		default:
			tcp := c.protocol == resource.ProtocolTCP
			if rest != nil && rest.svc != c.svc && (tcp || rest.protocol == resource.ProtocolTCP) {
				lost(c, *rest, "the traffic no other match takes")
				continue
			}
			if rest == nil {
				rest = &c
			}
			if tcp {
				r.tcpAll = c.cluster
			} else if take(c, "host "+name, "HTTP to "+c.value) {
				r.hosts[c.cluster] = append(r.hosts[c.cluster], name)
			} else {
				continue
			}
		}
		if _, ok := r.protocol[c.cluster]; !ok {
			r.order = append(r.order, c.cluster)
			r.protocol[c.cluster] = c.protocol
		}
	}
	return r
}

// prefixOf is the prefix of an IP or CIDR match, IPv4 for an IPv4-mapped
// address (what the proxy sees).
func prefixOf(c claim) (netip.Prefix, bool) {
	if c.typ == resource.MatchIP {
		a, err := netip.ParseAddr(c.value)
		if err != nil {
			return netip.Prefix{}, false
		}
		a = a.Unmap().WithZone("")
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	p, err := netip.ParsePrefix(c.value)
	if err != nil {
		return netip.Prefix{}, false
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

// renderShared renders the shared listener of port from the claims of
// the mesh's services on it, with its passthrough cluster and notes on
// the claims that lost.
func renderShared(port int, cs []claim) []Resource {
	r := resolve(port, cs)
	name := SharedListenerName(port)
	pass := passthroughName(port)
	l := &listenerv3.Listener{
		Name:                name,
		Address:             socketAddress(netip.IPv4Unspecified(), uint16(port)),
		AdditionalAddresses: []*listenerv3.AdditionalAddress{{Address: socketAddress(netip.IPv6Unspecified(), uint16(port))}},
		BindToPort:          wrapperspb.Bool(false),
		TrafficDirection:    corev3.TrafficDirection_OUTBOUND,
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       "envoy.filters.listener.tls_inspector",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspectorv3.TlsInspector{})},
		}},
	}
	for _, c := range r.order {
		if ps := r.prefixes[c]; len(ps) > 0 {
			m := &listenerv3.FilterChainMatch{}
			for _, p := range ps {
				m.PrefixRanges = append(m.PrefixRanges, &corev3.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))})
			}
			l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{Name: c + ":ip", FilterChainMatch: m,
				Filters: []*listenerv3.Filter{networkFilter(c, networkProtocol(r.protocol[c]))}})
		}
		if ns := r.snis[c]; len(ns) > 0 {
			l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{Name: c + ":sni", FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: ns},
				Filters: []*listenerv3.Filter{networkFilter(c, resource.ProtocolTCP)}})
		}
	}
	var vhosts []*routev3.VirtualHost
	for _, c := range r.order {
		if hs := r.hosts[c]; len(hs) > 0 {
			var domains []string
			for _, h := range hs {
				domains = append(domains, h, h+":"+strconv.Itoa(port))
			}
			vhosts = append(vhosts, httpManager(c, name, domains, r.protocol[c]).GetRouteConfig().VirtualHosts[0])
		}
	}
	if len(vhosts) > 0 {
		// Plain traffic that no Host matches passes through.
		hcm := httpManager(pass, name, []string{"*"}, resource.ProtocolHTTP)
		hcm.StatPrefix = name
		rc := hcm.GetRouteConfig()
		rc.VirtualHosts = append(vhosts, rc.VirtualHosts...)
		// A proxy whose reachableBackends leave a service out has no
		// cluster for it: its requests get 404, the others still route.
		rc.ValidateClusters = wrapperspb.Bool(false)
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{Name: "http",
			FilterChainMatch: &listenerv3.FilterChainMatch{TransportProtocol: "raw_buffer"},
			Filters: []*listenerv3.Filter{{
				Name:       "envoy.filters.network.http_connection_manager",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)},
			}}})
	}
	rest := pass
	if r.tcpAll != "" {
		rest = r.tcpAll
	}
	l.DefaultFilterChain = &listenerv3.FilterChain{Name: "rest", Filters: []*listenerv3.Filter{networkFilter(rest, resource.ProtocolTCP)}}
	out := []Resource{{Type: ListenerType, Name: name, Msg: l, Port: port}}
	if rest == pass {
		out = append(out, Resource{Type: ClusterType, Name: pass, Msg: originalDst(pass, resource.ProtocolTCP), Port: port})
	}
	for _, n := range r.notes {
		out = append(out, Resource{Note: n, Port: port})
	}
	return out
}

// notServed says why a MeshExternalService gets no resources ("" when
// it does).
func notServed(spec *resource.MeshExternalServiceSpec) string {
	d := spec.Destination
	switch {
	case d == nil:
		return ""
	case d.Type == resource.DestinationExtension:
		typ := ""
		if d.Extension != nil {
			typ = d.Extension.Type
		}
		return fmt.Sprintf("its destination is the extension %q, and meshnames runs no extensions", typ)
	case d.Type == resource.DestinationRegular:
		_, why := tlsOf(d.TLS)
		return why
	}
	return ""
}
