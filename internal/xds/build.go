package xds

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshnames/meshnames/internal/resource"
)

// Type is one of the xDS resource types served.
type Type int

// The types, in the order a change is sent: clusters before the
// endpoints they load and the listeners that route to them (Envoy's
// make-before-break order). Secrets (SDS) hold the certificates and keys
// of TLS origination; Envoy asks for them by name once it has the
// cluster that names them.
const (
	ClusterType Type = iota
	EndpointType
	ListenerType
	SecretType
	numTypes
)

// Type URLs of the served types.
const (
	ClusterURL  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointURL = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerURL = "type.googleapis.com/envoy.config.listener.v3.Listener"
	SecretURL   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

var typeURLs = [numTypes]string{ClusterURL, EndpointURL, ListenerURL, SecretURL}

// URL returns the type URL of t.
func (t Type) URL() string { return typeURLs[t] }

// String is the short name of t (CDS, EDS, LDS, SDS).
func (t Type) String() string { return [numTypes]string{"CDS", "EDS", "LDS", "SDS"}[t] }

// typeOf returns the type of a type URL.
func typeOf(url string) (Type, bool) {
	for t, u := range typeURLs {
		if u == url {
			return Type(t), true
		}
	}
	return 0, false
}

// Service is what a proxy needs to know of one service, in the builder's
// terms: its ports, addresses, names and endpoints. Render turns it into
// resources.
type Service struct {
	Key    resource.Key
	Labels map[string]string
	Ports  []Port
	// VIPs are the service's virtual IPs in the order of its status.
	VIPs []netip.Addr
	// Hostnames are the names the service holds (Available addresses).
	Hostnames []string
	// Endpoints by service port.
	Endpoints map[int][]Endpoint
	// NoEndpoints says why a port without endpoints has none.
	NoEndpoints string
	// External is set for a MeshExternalService (extsvc.go).
	External *External
}

// Port is one port of a service.
type Port struct {
	Port     int
	Name     string
	Protocol string
}

// Endpoint is one address behind a service port. Priority 0 is tried
// first; Zone names its locality.
type Endpoint struct {
	Addr     netip.AddrPort
	Zone     string
	Priority uint32
	// SNI, when set, is the server name the proxy sends to this endpoint
	// (another zone's ZoneIngress) over TLS.
	SNI string
	// Draining: the endpoint is shutting down but still serves (a
	// terminating Kubernetes endpoint); it is sent with health status
	// DRAINING, which Envoy treats as unhealthy and grpc-go leaves out.
	Draining bool
}

// Resource is one rendered resource. Port is the service port it serves;
// API marks the API listeners of proxyless gRPC, which are sent only to a
// client that names them. A Resource without Msg is a note only: what
// inspection says of the service (of Port, when set), sent to no proxy.
type Resource struct {
	Type Type
	Name string
	Msg  proto.Message
	Port int
	API  bool
	// Note says what the resource lacks and why, for inspection.
	Note string
	// Proxyless, when set, is the resource as proxyless gRPC clients get
	// it, where their shape differs from Envoy's (grpc-go NACKs
	// transport_socket_matches).
	Proxyless proto.Message
}

// ClusterName is the name of the cluster (and of its load assignment)
// of port of the service k.
func ClusterName(k resource.Key, port int) string {
	p := strconv.Itoa(port)
	switch k.Kind {
	case resource.MeshExternalService:
		return k.Name + "_" + p // seed 003: {name}_{port}
	case resource.MeshMultiZoneService:
		return k.Name + "_mzsvc_" + p
	default:
		return k.Name + "_msvc_" + p
	}
}

// OutboundName is the name of the outbound listener of a cluster.
func OutboundName(cluster string) string { return "outbound:" + cluster }

// APIListenerName is the name of the API listener a proxyless gRPC
// client asks for when it dials xds:///<hostname>:<port>.
func APIListenerName(hostname string, port int) string {
	return hostname + ":" + strconv.Itoa(port)
}

// Render returns the resources of s: per port a cluster, its load
// assignment, an outbound listener on the VIPs (when it has any) and an
// API listener per hostname. The result is deterministic: the same
// service renders the same messages.
func Render(s *Service) []Resource {
	if s.External != nil {
		return renderExternal(s)
	}
	out := make([]Resource, 0, len(s.Ports)*(3+len(s.Hostnames)))
	for _, p := range s.Ports {
		name := ClusterName(s.Key, p.Port)
		c := Resource{Type: ClusterType, Name: name, Port: p.Port}
		envoy, proxyless := cluster(name, p.Protocol, s.Endpoints[p.Port])
		c.Msg = envoy
		if proxyless != nil {
			c.Proxyless = proxyless
		}
		out = append(out, c,
			Resource{Type: EndpointType, Name: name, Msg: loadAssignment(name, s.Endpoints[p.Port]), Port: p.Port, Note: emptyNote(name, s, p.Port)})
		if len(s.VIPs) > 0 {
			out = append(out, Resource{Type: ListenerType, Name: OutboundName(name), Msg: outbound(name, s.VIPs, p), Port: p.Port})
		}
		for _, h := range s.Hostnames {
			ln := APIListenerName(h, p.Port)
			out = append(out, Resource{Type: ListenerType, Name: ln, Msg: apiListener(ln, h, name, p), Port: p.Port, API: true})
		}
	}
	return out
}

func emptyNote(cluster string, s *Service, port int) string {
	if len(s.Endpoints[port]) > 0 || s.NoEndpoints == "" {
		return ""
	}
	return "cluster " + cluster + " has no endpoints: " + s.NoEndpoints
}

// cluster returns the cluster of a port, and its proxyless shape when it
// differs: endpoints in other zones are reached through their ZoneIngress
// over TLS with the SNI it matches, which Envoy is told per endpoint
// (transport_socket_matches on the endpoint's metadata).
func cluster(name, protocol string, eps []Endpoint) (envoy, proxyless *clusterv3.Cluster) {
	c := plainCluster(name, protocol)
	var snis []string
	for _, e := range eps {
		if e.SNI != "" && !slices.Contains(snis, e.SNI) {
			snis = append(snis, e.SNI)
		}
	}
	if len(snis) == 0 {
		return c, nil
	}
	slices.Sort(snis)
	withTLS := plainCluster(name, protocol)
	for _, sni := range snis {
		withTLS.TransportSocketMatches = append(withTLS.TransportSocketMatches, &clusterv3.Cluster_TransportSocketMatch{
			Name:  sni,
			Match: &structpb.Struct{Fields: map[string]*structpb.Value{sniKey: structpb.NewStringValue(sni)}},
			TransportSocket: &corev3.TransportSocket{
				Name:       "envoy.transport_sockets.tls",
				ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{Sni: sni})},
			},
		})
	}
	return withTLS, c
}

// sniKey is the endpoint metadata key (under envoy.transport_socket_match)
// that picks an endpoint's transport socket.
const sniKey = "meshnames.io/sni"

func plainCluster(name, protocol string) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig: &corev3.ConfigSource{
				ResourceApiVersion:    corev3.ApiVersion_V3,
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			},
			ServiceName: name,
		},
		ConnectTimeout: durationpb.New(5 * time.Second),
		LbPolicy:       clusterv3.Cluster_ROUND_ROBIN,
	}
	if protocol == resource.ProtocolHTTP2 || protocol == resource.ProtocolGRPC {
		// Envoy speaks HTTP/1.1 upstream unless told; gRPC needs HTTP/2.
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(&httpv3.HttpProtocolOptions{
				UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
					ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
						ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
							Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
						},
					},
				},
			}),
		}
	}
	return c
}

// loadAssignment groups eps by (priority, zone) into localities, each
// with a weight: grpc-go drops a locality without one. Priorities are
// made contiguous from 0 (grpc-go wants them so): remote endpoints at
// priority 1 become 0 while no local one is Ready.
func loadAssignment(name string, eps []Endpoint) *endpointv3.ClusterLoadAssignment {
	eps = slices.Clone(eps)
	slices.SortFunc(eps, func(a, b Endpoint) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Zone, b.Zone), a.Addr.Compare(b.Addr), cmp.Compare(a.SNI, b.SNI))
	})
	eps = slices.Compact(eps)
	dense, last := uint32(0), uint32(0)
	for i := range eps {
		if i > 0 && eps[i].Priority != last {
			dense++
		}
		last = eps[i].Priority
		eps[i].Priority = dense
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	var cur *endpointv3.LocalityLbEndpoints
	for i, e := range eps {
		if i == 0 || e.Priority != eps[i-1].Priority || e.Zone != eps[i-1].Zone {
			cur = &endpointv3.LocalityLbEndpoints{
				Locality:            &corev3.Locality{Zone: e.Zone},
				LoadBalancingWeight: wrapperspb.UInt32(1),
				Priority:            e.Priority,
			}
			cla.Endpoints = append(cla.Endpoints, cur)
		}
		lb := &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: socketAddress(e.Addr.Addr(), e.Addr.Port()),
			}},
			HealthStatus:        corev3.HealthStatus_HEALTHY,
			LoadBalancingWeight: wrapperspb.UInt32(1),
		}
		if e.Draining {
			lb.HealthStatus = corev3.HealthStatus_DRAINING
		}
		if e.SNI != "" {
			lb.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				"envoy.transport_socket_match": {Fields: map[string]*structpb.Value{sniKey: structpb.NewStringValue(e.SNI)}},
			}}
		}
		cur.LbEndpoints = append(cur.LbEndpoints, lb)
	}
	return cla
}

func outbound(cluster string, vips []netip.Addr, p Port) *listenerv3.Listener {
	l := &listenerv3.Listener{
		Name:             OutboundName(cluster),
		Address:          socketAddress(vips[0], uint16(p.Port)),
		BindToPort:       wrapperspb.Bool(false),
		TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		FilterChains:     []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{networkFilter(cluster, p.Protocol)}}},
	}
	for _, v := range vips[1:] {
		l.AdditionalAddresses = append(l.AdditionalAddresses, &listenerv3.AdditionalAddress{Address: socketAddress(v, uint16(p.Port))})
	}
	return l
}

func networkFilter(cluster, protocol string) *listenerv3.Filter {
	if protocol == resource.ProtocolTCP || protocol == "" {
		return &listenerv3.Filter{
			Name: "envoy.filters.network.tcp_proxy",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(&tcpv3.TcpProxy{
				StatPrefix:       cluster,
				ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: cluster},
			})},
		}
	}
	return &listenerv3.Filter{
		Name:       "envoy.filters.network.http_connection_manager",
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(httpManager(cluster, cluster, []string{"*"}, protocol))},
	}
}

// apiListener is the listener grpc-go asks for by name: an HTTP
// connection manager whose one virtual host matches the dialed target.
func apiListener(name, host, cluster string, p Port) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name: name,
		ApiListener: &listenerv3.ApiListener{
			ApiListener: mustAny(httpManager(cluster, name, []string{name, host}, resource.ProtocolGRPC)),
		},
	}
}

// httpManager routes every request to cluster. The router is the last
// (and only) HTTP filter, as grpc-go requires.
func httpManager(cluster, routeName string, domains []string, protocol string) *hcmv3.HttpConnectionManager {
	action := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}
	if protocol == resource.ProtocolGRPC {
		action.Timeout = durationpb.New(0) // streams may last: no route timeout
	}
	return &hcmv3.HttpConnectionManager{
		StatPrefix: cluster,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: routeName,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    cluster,
				Domains: domains,
				Routes: []*routev3.Route{{
					Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
					Action: &routev3.Route_Route{Route: action},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
		}},
	}
}

func socketAddress(a netip.Addr, port uint16) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       a.Unmap().String(),
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}

// mustAny wraps m, deterministically marshaled; the messages here are
// built by this package and always marshal.
func mustAny(m proto.Message) *anypb.Any {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic("xds: marshal " + string(m.ProtoReflect().Descriptor().FullName()) + ": " + err.Error())
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()), Value: b}
}
