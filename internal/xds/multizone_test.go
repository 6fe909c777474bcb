package xds

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

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
			if took > 100*time.Millisecond {
				t.Errorf("the ingress endpoint reached the proxy %s after the write, want under 100 ms", took)
			}
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
