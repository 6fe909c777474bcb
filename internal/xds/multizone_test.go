package xds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// TestSNI: readable while it fits DNS, hashed when not; both sides of an
// ingress compute it from the same parts.
func TestSNI(t *testing.T) {
	for _, tc := range []struct {
		mesh, zone, name, ns string
		port                 int
		want                 string
	}{
		{"default", "east", "redis", "", 6379, "redis.6379.east.default.mesh"},
		{"default", "east", "web", "shop", 80, "web.shop.80.east.default.mesh"},
		{"a.b", "east", "web", "", 80, "web.80.east.a.b.mesh"},
	} {
		if got := SNI(tc.mesh, tc.zone, tc.name, tc.ns, tc.port); got != tc.want {
			t.Errorf("SNI(%q, %q, %q, %q, %d) = %q, want %q", tc.mesh, tc.zone, tc.name, tc.ns, tc.port, got, tc.want)
		}
	}
	long := strings.Repeat("a", 70)
	got := SNI("default", "east", long, "", 80)
	if len(got) > 253 || got != SNI("default", "east", long, "", 80) || got == SNI("default", "west", long, "", 80) {
		t.Errorf("hashed SNI %q: want a stable name within DNS limits that tells zones apart", got)
	}
	if !isName(got) {
		t.Errorf("hashed SNI %q is no DNS name", got)
	}
}

// TestMultiZone_FailsOverToTheIngress: a MeshMultiZoneService matching a
// local MeshService and one of zone-b. A grpc-go client calls the local
// backend; once it is NotReady the proxy's load assignment holds zone-b's
// ingress, with its SNI, within 100 ms of the write.
func TestMultiZone_FailsOverToTheIngress(t *testing.T) {
	ingress := netip.MustParseAddrPort("192.0.2.10:10001")
	e := newEnvWith(t, func(b *Builder) {
		b.IngressesOf = func(_ *cache.Cache, zone string) []netip.AddrPort {
			if zone == "zone-b" {
				return []netip.AddrPort{ingress}
			}
			return nil
		}
	})
	local := startBackend(t, "local")
	e.dataplane("client", "client", 9999)
	e.dataplane("echo-1", "echo", local.port)
	e.service("echo", "241.0.0.1", nil, grpcPort("grpc"))
	mz := e.create(&resource.Object{Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "echo-all",
		Spec: &resource.MeshMultiZoneServiceSpec{Selector: resource.MultiZoneSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"app": "echo"}}}}})
	mz.Status = &resource.MultiZoneServiceStatus{
		ServiceStatus: resource.ServiceStatus{
			Addresses: []resource.Address{{Hostname: "echo-all.mzsvc.mesh.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "mz"}}},
			VIPs:      []resource.VIP{{IP: "243.0.0.1", Type: resource.VIPKuma}},
		},
		Ports:        []resource.Port{{Port: 8080, Name: "grpc", AppProtocol: resource.ProtocolGRPC}},
		MeshServices: []resource.MeshServiceRef{{Name: "echo", Zone: "zone-a", Mesh: "default"}, {Name: "echo", Zone: "zone-b", Mesh: "default"}},
	}
	e.updateStatus(mz)

	c := xdsClient(t, e, "client", "echo-all.mzsvc.mesh.local:8080")
	until(t, "the local backend answers", c, func(id string, err error) bool { return err == nil && id == "local" })

	d := newDeltaClient(t, e, "default.client", nil)
	d.settle()
	cla := func() *endpointv3.ClusterLoadAssignment {
		v := d.state[EndpointURL]["echo-all_mzsvc_8080"]
		if v == "" {
			return nil
		}
		return d.last["echo-all_mzsvc_8080"]
	}
	if got := cla(); got == nil || len(got.GetEndpoints()) != 2 || got.GetEndpoints()[1].GetPriority() != 1 {
		t.Fatalf("before the failover: %v; want the local locality at priority 0 and zone-b's at 1", got)
	}

	wrote := time.Now()
	e.update(resource.Key{Kind: resource.Dataplane, Mesh: "default", Name: "echo-1"}, func(o *resource.Object) {
		o.Spec.(*resource.DataplaneSpec).Networking.Inbound[0].State = resource.InboundNotReady
	})
	for {
		r := d.next(5 * time.Second)
		if r == nil {
			t.Fatal("no update of the multi-zone service's endpoints")
		}
		got := cla()
		if got != nil && len(got.GetEndpoints()) == 1 {
			took := time.Since(wrote)
			ep := got.GetEndpoints()[0]
			addr := ep.GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			sni := ep.GetLbEndpoints()[0].GetMetadata().GetFilterMetadata()["envoy.transport_socket_match"].GetFields()[sniKey].GetStringValue()
			if ep.GetPriority() != 0 || ep.GetLocality().GetZone() != "zone-b" || addr.GetAddress() != "192.0.2.10" || addr.GetPortValue() != 10001 || sni != "echo.8080.zone-b.default.mesh" {
				t.Fatalf("after the failover: %v", got)
			}
			// The 100 ms bound is held by TestXDS_AcrossZones on real
			// processes; here the figure is only logged, as a unit test
			// is no timer.
			t.Logf("the ingress endpoint reached the proxy %s after the write", took)
			break
		}
	}
	// The proxyless client got the shape without TLS sockets, and still
	// accepts the config (it is not NACKed).
	in, _ := e.srv.Inspect(Proxy{Mesh: "default", Name: "client"})
	for _, st := range in.Streams {
		for _, ty := range st.Types {
			if ty.Nack != nil {
				t.Errorf("%s stream NACKed %s: %s", st.Protocol, ty.Type, ty.Nack.Message)
			}
		}
	}
}

// TestBuilder_BuildsMeshesProxiesUse: a mesh no proxy uses has no table
// and no work; its first proxy gets its whole config; the table goes
// IdleGrace after the last proxy, and the next one gets it built again.
func TestBuilder_BuildsMeshesProxiesUse(t *testing.T) {
	e := newEnvWith(t, func(b *Builder) { b.IdleGrace = 50 * time.Millisecond })
	e.dataplane("client", "client", 9999)
	e.service("web", "241.0.0.1", nil, grpcPort("grpc"))
	built := func() bool {
		e.b.mu.Lock()
		defer e.b.mu.Unlock()
		return e.b.meshes["default"] != nil
	}
	if built() {
		t.Fatal("a table was built for a mesh no proxy uses")
	}
	for round := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		d := newDeltaClientCtx(t, ctx, e, "default.client")
		d.settle()
		if !built() || len(d.state[ClusterURL]) != 1 || len(d.state[ListenerURL]) != 1 {
			t.Fatalf("round %d: built %v, proxy state %v", round, built(), d.state)
		}
		cancel()
		deadline := time.Now().Add(10 * time.Second)
		for built() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the table outlived its last proxy by 10 s", round)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// ingressClient opens a delta stream as the ZoneIngress name's proxy.
func ingressClient(t *testing.T, e *env, name string) *deltaClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := dialADS(t, e.addr).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &deltaClient{t: t, stream: s, state: map[string]map[string]string{}, got: make(chan *discovery.DeltaDiscoveryResponse, 64),
		last: map[string]*endpointv3.ClusterLoadAssignment{}, listeners: map[string]*listenerv3.Listener{}}
	node := &corev3.Node{Id: name, Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"proxyType": structpb.NewStringValue("ingress")}}}
	for _, url := range typeURLs {
		c.state[url] = map[string]string{}
		if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: url}); err != nil {
			t.Fatal(err)
		}
	}
	go c.recv()
	return c
}

// ingressObject creates a ZoneIngress of zone (origin global when it is
// not zone-a, as the sync writes it).
func (e *env) ingressObject(name, zone, addr string, port int) {
	e.t.Helper()
	labels := map[string]string{resource.LabelZone: zone, resource.LabelOrigin: resource.OriginZone}
	if zone != "zone-a" {
		labels[resource.LabelOrigin] = resource.OriginGlobal
	}
	e.create(&resource.Object{Kind: resource.ZoneIngress, Name: name, Labels: labels,
		Spec: &resource.ZoneIngressSpec{Networking: resource.ZoneIngressNetworking{Address: addr, Port: port}}})
}

// TestIngress_RoutesExportedServicesBySNI: this zone's ZoneIngress proxy
// gets a listener with one SNI filter chain per port of each exported
// local MeshService, passing through to a cluster of its local endpoints;
// an unexported service gets none; an export change reaches it.
func TestIngress_RoutesExportedServicesBySNI(t *testing.T) {
	e := newEnv(t, nil)
	e.ingressObject("ingress-1", "zone-a", "127.0.0.1", 10001)
	e.dataplane("web-1", "web", 7001)
	e.dataplane("db-1", "db", 5432)
	e.service("web", "241.0.0.1", nil, grpcPort("grpc"))
	db := e.service("db", "241.0.0.2", nil, resource.Port{Port: 5432, TargetPort: &resource.IntOrString{Int: 5432}, AppProtocol: resource.ProtocolTCP})
	e.update(db.Key(), func(o *resource.Object) {
		o.Spec.(*resource.MeshServiceSpec).Export = &resource.Export{Mode: resource.ExportNone}
	})
	c := ingressClient(t, e, "ingress-1")
	c.settle()
	l := c.listeners["ingress:ingress-1"]
	if l == nil {
		t.Fatalf("no ingress listener: %v", c.state)
	}
	var snis []string
	for _, fc := range l.GetFilterChains() {
		snis = append(snis, fc.GetFilterChainMatch().GetServerNames()...)
	}
	if want := []string{"web.8080.zone-a.default.mesh"}; !slices.Equal(snis, want) {
		t.Errorf("ingress SNIs %v, want %v (db is not exported)", snis, want)
	}
	if cla := c.last["default:web_msvc_8080"]; cla == nil || len(cla.GetEndpoints()) != 1 {
		t.Errorf("the ingress's web cluster: %v", cla)
	}
	if _, ok := c.state[ClusterURL]["default:db_msvc_5432"]; ok {
		t.Error("the ingress got a cluster of the unexported db")
	}
	e.update(db.Key(), func(o *resource.Object) { o.Spec.(*resource.MeshServiceSpec).Export = nil })
	c.settle()
	snis = nil
	for _, fc := range c.listeners["ingress:ingress-1"].GetFilterChains() {
		snis = append(snis, fc.GetFilterChainMatch().GetServerNames()...)
	}
	if want := []string{"db.5432.zone-a.default.mesh", "web.8080.zone-a.default.mesh"}; !slices.Equal(snis, want) {
		t.Errorf("after db is exported: SNIs %v, want %v", snis, want)
	}
	validateDeep(t, "ingress:ingress-1", c.listeners["ingress:ingress-1"])

	// A second ingress of the zone: each proxy gets its own listener only,
	// and inspection shows that, with its stream.
	e.ingressObject("ingress-2", "zone-a", "127.0.0.2", 10001)
	c.settle()
	if _, ok := c.state[ListenerURL]["ingress:ingress-2"]; ok {
		t.Error("ingress-1's proxy got ingress-2's listener")
	}
	in, err := e.srv.Inspect(Proxy{Name: "ingress-1"})
	if err != nil || in.ZoneIngress != "ingress-1" || in.Mesh != "" || len(in.Streams) != 1 {
		t.Fatalf("Inspect(zoneingress/ingress-1) = %+v, %v; want the ingress and its stream", in, err)
	}
	var config bytes.Buffer // protojson spaces its output at random
	if err := json.Compact(&config, in.Config); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"ingress:ingress-1"`, `"serverNames":["db.5432.zone-a.default.mesh"]`, `"name":"default:web_msvc_8080"`} {
		if !strings.Contains(config.String(), want) {
			t.Errorf("the ingress's inspection lacks %s: %s", want, in.Config)
		}
	}
	if strings.Contains(config.String(), "ingress:ingress-2") {
		t.Errorf("ingress-1's inspection shows ingress-2's listener: %s", in.Config)
	}
	// An ingress of another zone is no proxy of this control plane.
	e.ingressObject("ingress-b", "zone-b", "192.0.2.1", 10001)
	p, ref := e.srv.o.Auth.Check(peerCtx("127.0.0.1", nil), &corev3.Node{Id: "ingress-b",
		Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"proxyType": structpb.NewStringValue("ingress")}}})
	if ref == nil || ref.Reason != "unknown_dataplane" {
		t.Errorf("another zone's ingress connecting here: %v, %v", p, ref)
	}
	if _, err := e.srv.Inspect(Proxy{Name: "ingress-b"}); !errors.Is(err, ErrNoDataplane) {
		t.Errorf("inspecting another zone's ingress: %v, want ErrNoDataplane", err)
	}
}

// TestIngress_InspectSaysWhyNoListener: an ingress of a zone that exports
// nothing gets no listener, and its inspection says why.
func TestIngress_InspectSaysWhyNoListener(t *testing.T) {
	e := newEnv(t, nil)
	e.ingressObject("ingress-1", "zone-a", "127.0.0.1", 10001)
	e.dataplane("db-1", "db", 5432)
	db := e.service("db", "241.0.0.2", nil, resource.Port{Port: 5432, TargetPort: &resource.IntOrString{Int: 5432}, AppProtocol: resource.ProtocolTCP})
	e.update(db.Key(), func(o *resource.Object) {
		o.Spec.(*resource.MeshServiceSpec).Export = &resource.Export{Mode: resource.ExportNone}
	})
	c := ingressClient(t, e, "ingress-1")
	c.settle()
	if len(c.state[ListenerURL]) != 0 || len(c.state[ClusterURL]) != 0 {
		t.Errorf("an ingress with nothing exported got %v", c.state)
	}
	in, err := e.srv.Inspect(Proxy{Name: "ingress-1"})
	want := "ZoneIngress ingress-1 has no listener: no MeshService of this zone is exported (spec.export.mode, else services.exportDefault)"
	if err != nil || !slices.Equal(in.Notes, []string{want}) {
		t.Errorf("inspection notes %q (%v), want %q", in.Notes, err, want)
	}
}

// TestIngress_OtherZonesThroughTheirIngress: a MeshService synced from
// zone-b has zone-b's ingress (advertised address and port) as its
// endpoint, with the SNI that ingress matches; no ingress, no endpoint,
// and inspect says why.
func TestIngress_OtherZonesThroughTheirIngress(t *testing.T) {
	e := newEnv(t, nil)
	e.dataplane("client", "client", 9999)
	o := e.create(&resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "api-x1y2",
		Labels: map[string]string{resource.LabelZone: "zone-b", resource.LabelOrigin: resource.OriginGlobal, resource.LabelDisplayName: "api"},
		Spec:   &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 80, AppProtocol: resource.ProtocolHTTP}}}})
	o.Status = &resource.ServiceStatus{VIPs: []resource.VIP{{IP: "241.0.0.9", Type: resource.VIPKuma}}}
	e.updateStatus(o)
	c := newDeltaClient(t, e, "default.client", nil)
	c.settle()
	if cla := c.last["api-x1y2_msvc_80"]; cla == nil || len(cla.GetEndpoints()) != 0 {
		t.Fatalf("without an ingress in zone-b: %v", cla)
	}
	in, _ := e.srv.Inspect(Proxy{Mesh: "default", Name: "client"})
	if !slices.ContainsFunc(in.Notes, func(n string) bool {
		return strings.Contains(n, "no ZoneIngress of that zone with an IP address is known")
	}) {
		t.Errorf("inspect notes %q: want why the cluster is empty", in.Notes)
	}
	// An ingress reached at a DNS name is no EDS endpoint.
	e.create(&resource.Object{Kind: resource.ZoneIngress, Name: "ingress-dns-h", Labels: map[string]string{resource.LabelZone: "zone-b", resource.LabelOrigin: resource.OriginGlobal},
		Spec: &resource.ZoneIngressSpec{Networking: resource.ZoneIngressNetworking{Address: "10.1.0.2", Port: 10001, AdvertisedAddress: "ingress.b.example.com", AdvertisedPort: 443}}})
	c.settle()
	if cla := c.last["api-x1y2_msvc_80"]; len(cla.GetEndpoints()) != 0 {
		t.Fatalf("with zone-b's ingress at a DNS name: %v", cla)
	}
	e.create(&resource.Object{Kind: resource.ZoneIngress, Name: "ingress-1-h", Labels: map[string]string{resource.LabelZone: "zone-b", resource.LabelOrigin: resource.OriginGlobal},
		Spec: &resource.ZoneIngressSpec{Networking: resource.ZoneIngressNetworking{Address: "10.1.0.1", Port: 10001, AdvertisedAddress: "192.0.2.7", AdvertisedPort: 443}}})
	c.settle()
	cla := c.last["api-x1y2_msvc_80"]
	if cla == nil || len(cla.GetEndpoints()) != 1 {
		t.Fatalf("with zone-b's ingress: %v", cla)
	}
	lb := cla.GetEndpoints()[0].GetLbEndpoints()[0]
	a := lb.GetEndpoint().GetAddress().GetSocketAddress()
	sni := lb.GetMetadata().GetFilterMetadata()["envoy.transport_socket_match"].GetFields()[sniKey].GetStringValue()
	if a.GetAddress() != "192.0.2.7" || a.GetPortValue() != 443 || sni != "api.80.zone-b.default.mesh" {
		t.Errorf("endpoint %v, SNI %q", a, sni)
	}
}
