package xds

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshnames/meshnames/internal/resource"
)

// This file renders a MeshExternalService (seed 003) for proxies: per
// matched port a cluster named <name>_<port>, its endpoints, the TLS it
// originates (exttls.go), a listener on the VIPs of its InternalVIP and
// HostnameGenerator matches, and API listeners for proxyless gRPC where
// such a client can use the cluster. Domain, IP and CIDR matches are
// filter chains of listeners that the services of a mesh share per port
// (extlisteners.go).

// External is what a MeshExternalService adds to its Service: the spec,
// and the VIPs of its InternalVIP values (status.vips entries that name
// a hostname). The Service's VIPs are those of its generated names
// (entries without one), and its Hostnames every name it holds, values
// and generated names alike.
type External struct {
	Spec      *resource.MeshExternalServiceSpec
	NamedVIPs map[string][]netip.Addr
	// SystemCA is the file of CAs the proxy trusts when a TLS destination
	// has no caCert: DefaultSystemCA when empty.
	SystemCA string
}

// DefaultSystemCA is where Debian, Ubuntu and Alpine (and Envoy's
// images) keep the system's trusted CAs.
const DefaultSystemCA = "/etc/ssl/certs/ca-certificates.crt"

// externalService reads what proxies need of a MeshExternalService into s.
func (b *Builder) externalService(st *meshState, o *resource.Object, spec *resource.MeshExternalServiceSpec, s *Service) {
	x := &External{Spec: spec, NamedVIPs: map[string][]netip.Addr{}}
	if st, ok := o.Status.(resource.ServiceStatusOf); ok && st != nil {
		for _, v := range st.Service().VIPs {
			if a, err := netip.ParseAddr(v.IP); err == nil && v.Hostname != "" {
				x.NamedVIPs[v.Hostname] = append(x.NamedVIPs[v.Hostname], a)
			}
		}
	}
	s.External = x
	st.ext.set(o, spec)
}

// renderExternal renders a MeshExternalService; what it cannot serve is
// said in notes.
func renderExternal(s *Service) []Resource {
	x, name := s.External, s.Key.Name
	dest := x.Spec.Destination
	if dest == nil {
		dest = &resource.ExternalDestination{Type: resource.DestinationPassthrough}
	}
	out := []Resource{}
	if why := notServed(x.Spec); why != "" {
		return []Resource{{Note: "MeshExternalService " + name + " is not served: " + why}}
	}
	tls, _ := tlsOf(dest.TLS)
	held := map[string]bool{}
	for _, h := range s.Hostnames {
		held[h] = true
	}
	for _, port := range x.Spec.Ports() {
		cname := ClusterName(s.Key, port)
		proto := protocolOf(x.Spec, port)
		var proxyless string // why a gRPC client cannot use the cluster
		if dest.Type == resource.DestinationPassthrough {
			out = append(out, Resource{Type: ClusterType, Name: cname, Msg: originalDst(cname, proto), Port: port})
			proxyless = "it passes traffic through to its original destination (an ORIGINAL_DST cluster), which gRPC clients do not implement"
		} else {
			c, cla, why, notes := regularCluster(cname, proto, dest.Endpoints)
			for _, n := range notes {
				out = append(out, Resource{Note: "cluster " + cname + ": " + n, Port: port})
			}
			proxyless = why
			if tls != nil {
				sni := serverName(x.Spec, dest, port)
				sock, secrets := tls.socket(cname, sni, subjectAltNames(dest, sni), x.SystemCA)
				c.TransportSocket = sock
				for _, sec := range secrets {
					out = append(out, Resource{Type: SecretType, Name: sec.Name, Msg: sec, Port: port})
				}
				// grpc-go NACKs tls_params and SDS secrets: it takes
				// certificates only from its bootstrap's providers.
				proxyless = "it originates TLS with certificates sent by SDS, which gRPC clients do not take"
			}
			out = append(out, Resource{Type: ClusterType, Name: cname, Msg: c, Port: port})
			if cla != nil {
				out = append(out, Resource{Type: EndpointType, Name: cname, Msg: cla, Port: port})
			}
		}
		vips, names := vipsAndNames(s, held, port)
		switch {
		case len(vips) == 0:
		case dest.Type == resource.DestinationPassthrough:
			out = append(out, Resource{Note: "MeshExternalService " + name + ": no listener on the VIPs of port " + fmt.Sprint(port) +
				": traffic to a VIP has no original destination to pass through to", Port: port})
		default:
			out = append(out, Resource{Type: ListenerType, Name: OutboundName(cname), Msg: outbound(cname, vips, Port{Port: port, Protocol: networkProtocol(proto)}), Port: port})
		}
		if len(names) > 0 && proxyless != "" {
			out = append(out, Resource{Note: "proxyless gRPC clients get no API listener for " + cname + " (" + strings.Join(names, ", ") + "): " + proxyless, Port: port})
			continue
		}
		for _, h := range names {
			ln := APIListenerName(h, port)
			out = append(out, Resource{Type: ListenerType, Name: ln, Msg: apiListener(ln, h, cname, Port{Port: port, Protocol: proto}), Port: port, API: true})
		}
	}
	return out
}

// protocolOf is the protocol of the matches on port (validation keeps
// one per port).
func protocolOf(spec *resource.MeshExternalServiceSpec, port int) string {
	for _, m := range spec.Match {
		if m.Port == port {
			return m.Protocol
		}
	}
	return resource.ProtocolTCP
}

// networkProtocol is how a listener handles a match protocol: tls is TLS
// the client originates, passed on as TCP.
func networkProtocol(proto string) string {
	if proto == resource.ProtocolTLS {
		return resource.ProtocolTCP
	}
	return proto
}

// vipsAndNames returns the VIPs and the names that capture port: those
// of the InternalVIP values on the port that the service holds, and for
// a HostnameGenerator match the generated names and their VIPs.
func vipsAndNames(s *Service, held map[string]bool, port int) ([]netip.Addr, []string) {
	x := s.External
	values := map[string]bool{}
	for _, m := range x.Spec.Match {
		if m.Type == resource.MatchInternalVIP {
			values[m.Value] = true
		}
	}
	var vips []netip.Addr
	var names []string
	for _, m := range x.Spec.Match {
		if m.Port != port {
			continue
		}
		switch {
		case m.Type == resource.MatchInternalVIP && held[m.Value]:
			vips = append(vips, x.NamedVIPs[m.Value]...)
			names = append(names, m.Value)
		case m.Type == resource.MatchHostnameGenerator:
			vips = append(vips, s.VIPs...)
			for _, h := range s.Hostnames {
				if !values[h] {
					names = append(names, h)
				}
			}
		}
	}
	return uniq(vips), uniq(names)
}

// uniq drops repeats, keeping the first of each.
func uniq[T comparable](xs []T) []T {
	seen := map[T]bool{}
	return slices.DeleteFunc(xs, func(x T) bool {
		if seen[x] {
			return true
		}
		seen[x] = true
		return false
	})
}

// originalDst is the cluster of a Passthrough destination: Envoy connects
// to the address the client connected to.
func originalDst(name, proto string) *clusterv3.Cluster {
	c := plainCluster(name, proto)
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}
	c.EdsClusterConfig = nil
	c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
	return c
}

// regularCluster is the cluster of a Regular destination. IP addresses
// and unix sockets are EDS endpoints; with a DNS name among them the
// cluster resolves it (LOGICAL_DNS for a lone name, which gRPC clients
// support too; STRICT_DNS otherwise) and holds its endpoints itself,
// where a unix socket has no place. It returns why a gRPC client cannot
// use the cluster ("" when it can) and notes on endpoints left out.
func regularCluster(name, proto string, eps []resource.ExternalEndpoint) (c *clusterv3.Cluster, cla *endpointv3.ClusterLoadAssignment, proxyless string, notes []string) {
	c = plainCluster(name, proto)
	dns, unix := 0, 0
	for _, e := range eps {
		switch {
		case strings.HasPrefix(e.Address, "unix://"):
			unix++
		case !isIP(e.Address):
			dns++
		}
	}
	var lbs []*endpointv3.LbEndpoint
	for _, e := range eps {
		path, isUnix := strings.CutPrefix(e.Address, "unix://")
		switch {
		case isUnix && dns > 0:
			notes = append(notes, "the unix socket "+e.Address+" is left out: a cluster that resolves DNS names holds socket addresses only")
		case isUnix:
			lbs = append(lbs, lbEndpoint(&corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: path}}}))
		default:
			lbs = append(lbs, lbEndpoint(&corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: e.Address, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(e.Port)},
			}}}))
		}
	}
	cla = &endpointv3.ClusterLoadAssignment{ClusterName: name}
	if len(lbs) > 0 {
		cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{Locality: &corev3.Locality{}, LoadBalancingWeight: wrapperspb.UInt32(1), LbEndpoints: lbs}}
	}
	switch {
	case dns == 0 && unix > 0:
		return c, cla, "it has unix:// endpoints, which gRPC clients do not dial", notes
	case dns == 0:
		return c, cla, "", notes
	}
	typ := clusterv3.Cluster_STRICT_DNS
	if len(lbs) == 1 {
		typ = clusterv3.Cluster_LOGICAL_DNS
	}
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: typ}
	c.EdsClusterConfig = nil
	c.LoadAssignment = cla
	if typ == clusterv3.Cluster_STRICT_DNS {
		proxyless = "it resolves several endpoints with DNS (a STRICT_DNS cluster), which gRPC clients do not implement"
	}
	return c, nil, proxyless, notes
}

func lbEndpoint(a *corev3.Address) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{
		HostIdentifier:      &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: a}},
		HealthStatus:        corev3.HealthStatus_HEALTHY,
		LoadBalancingWeight: wrapperspb.UInt32(1),
	}
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
