package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/xds"
	"github.com/meshnames/meshnames/internal/zonesync"
)

// zoneBDoc is what zone b holds: an exported MeshService api, an
// unexported secret and an echo that a MeshMultiZoneService groups with
// a's, each backed by a Dataplane.
const zoneBDoc = `type: Dataplane
mesh: default
name: api-1
networking:
  address: 127.0.0.1
  inbound:
  - name: http
    port: 7001
    tags:
      kuma.io/service: api
---
type: MeshService
mesh: default
name: api
spec:
  selector:
    dataplaneTags:
      kuma.io/service: api
  ports:
  - port: 80
    targetPort: http
    appProtocol: http
---
type: Dataplane
mesh: default
name: secret-1
networking:
  address: 127.0.0.1
  inbound:
  - name: tcp
    port: 7002
    tags:
      kuma.io/service: secret
---
type: MeshService
mesh: default
name: secret
spec:
  selector:
    dataplaneTags:
      kuma.io/service: secret
  ports:
  - port: 5432
    targetPort: tcp
    appProtocol: tcp
  export:
    mode: None
---
type: Dataplane
mesh: default
name: echo-b-1
networking:
  address: 127.0.0.1
  inbound:
  - name: grpc
    port: 7003
    tags:
      kuma.io/service: echo
---
` + echoService

// echoService is the MeshService echo of either zone, which the
// MeshMultiZoneService echo-mz selects by its label.
const echoService = `type: MeshService
mesh: default
name: echo
labels:
  app: echo
spec:
  selector:
    dataplaneTags:
      kuma.io/service: echo
  ports:
  - port: 8080
    name: grpc
    targetPort: grpc
    appProtocol: grpc
`

// echoInA is the Dataplane of a's echo backend.
const echoInA = `type: Dataplane
mesh: default
name: echo-a-1
networking:
  address: 127.0.0.1
  inbound:
  - name: grpc
    port: %d
    tags:
      kuma.io/service: echo
`

const zoneIngressDoc = `type: ZoneIngress
name: ingress-b
networking:
  address: 127.0.0.1
  port: %d
  advertisedAddress: 127.0.0.1
  advertisedPort: %d
`

// lbEndpoint is one endpoint of a load assignment as the test reads it.
type lbEndpoint struct {
	priority   uint32
	zone, addr string
	sni        string
}

func endpointsOf(cla *endpointv3.ClusterLoadAssignment) []lbEndpoint {
	var out []lbEndpoint
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, lbEndpoint{
				priority: loc.GetPriority(), zone: loc.GetLocality().GetZone(),
				addr: fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()),
				sni:  lb.GetMetadata().GetFilterMetadata()["envoy.transport_socket_match"].GetFields()["meshnames.io/sni"].GetStringValue(),
			})
		}
	}
	return out
}

// clusterSNIs are the SNIs of a cluster's TLS transport socket matches.
func clusterSNIs(t *testing.T, c *clusterv3.Cluster) []string {
	t.Helper()
	var out []string
	for _, m := range c.GetTransportSocketMatches() {
		var tc tlsv3.UpstreamTlsContext
		if err := m.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tc); err != nil {
			t.Fatalf("cluster %s, transport socket %s: %v", c.GetName(), m.GetName(), err)
		}
		out = append(out, tc.GetSni())
	}
	return out
}

// ingressChains maps each SNI of an ingress listener to the cluster its
// filter chain passes the connection to.
func ingressChains(t *testing.T, l *listenerv3.Listener) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, fc := range l.GetFilterChains() {
		var tp tcpv3.TcpProxy
		if len(fc.GetFilters()) != 1 || fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(&tp) != nil {
			t.Fatalf("filter chain %s: want one tcp_proxy filter, got %v", fc.GetName(), fc.GetFilters())
		}
		for _, sni := range fc.GetFilterChainMatch().GetServerNames() {
			out[sni] = tp.GetCluster()
		}
	}
	return out
}

// TestXDS_AcrossZones runs a global and zones a and b as real processes.
// A proxy in a reaches b's exported service api through b's ZoneIngress:
// its cluster's endpoint is the ingress's advertised address and port,
// with the SNI that b's ingress proxy routes by; without an ingress in b
// the cluster is empty and inspect xds says why; b's unexported secret is
// in neither proxy's config. Then a proxyless gRPC client in a calls the
// MeshMultiZoneService echo-mz, whose only Ready backend is a's; when it
// turns NotReady, b's ingress (priority 1 until then) is in the config of
// a's proxies within 100 ms of the write's acknowledgement.
//
// No Envoy runs here: at b's ingress's advertised address stands a gRPC
// echo server, so the client's calls show which endpoint its config
// holds. (A real ingress passes TLS through by SNI; a proxyless client
// gets the cluster without TLS and would need one that speaks plain.)
func TestXDS_AcrossZones(t *testing.T) {
	g, zones := startZones(t, "a", "b")
	a, b := zones[0], zones[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apply := func(z *proc, doc string) {
		t.Helper()
		if _, stderr, err := run(t, ctx, []byte(doc), "apply", "-f", "-", "--server", z.api); err != nil {
			t.Fatalf("apply in %s: %v\n%s\n%s", z.name, err, stderr, doc)
		}
	}
	token := func(z *proc, args ...string) string {
		t.Helper()
		out, stderr, err := run(t, ctx, nil, append(append([]string{"token"}, args...), "--server", z.api)...)
		if err != nil {
			t.Fatalf("token %v in %s: %v\n%s", args, z.name, err, stderr)
		}
		return strings.TrimSpace(out)
	}

	echoA := startEcho(t, "echo-a")
	standIn := startEcho(t, "b-ingress") // at b's ingress's advertised address
	ingressAddr := fmt.Sprintf("127.0.0.1:%d", standIn)
	apply(b, zoneBDoc)
	apply(a, fmt.Sprintf(echoInA, echoA)+"---\n"+echoService+`---
type: Dataplane
mesh: default
name: client
networking:
  address: 127.0.0.1
`)
	apiInA := zonesync.HashedName(resource.MeshService, "default", "api", "b", "")
	apiCluster := xds.ClusterName(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: apiInA}, 80)
	waitFor(t, 20*time.Second, "a has b's api", func() bool {
		resp, err := http.Get(a.api + msPath(apiInA))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// No ingress in b yet: the cluster is there, empty, and inspect says why.
	client := watchADS(t, ctx, a.xds, &corev3.Node{Id: "default.client"}, nil)
	var cla endpointv3.ClusterLoadAssignment
	client.until("the empty cluster of b's api", 20*time.Second, func() bool {
		return client.get(xds.EndpointURL, apiCluster, &cla)
	})
	if eps := endpointsOf(&cla); len(eps) != 0 {
		t.Fatalf("b's api without an ingress in b: endpoints %v, want none", eps)
	}
	out, stderr, err := run(t, ctx, nil, "inspect", "xds", "default/client", "--server", a.api)
	if want := "cluster " + apiCluster + " has no endpoints: the service is in zone b, and no ZoneIngress of that zone with an IP address is known"; err != nil || !strings.Contains(out, want) {
		t.Errorf("inspect xds default/client in a: %v %s\nwant the note %q in:\n%s", err, stderr, want, out)
	}

	// b's ingress: a's proxy reaches api at its advertised address with
	// the documented SNI <name>.<port>.<zone>.<mesh>.mesh.
	apply(b, fmt.Sprintf(zoneIngressDoc, freePort(t), standIn))
	const apiSNI = "api.80.b.default.mesh"
	var apiC clusterv3.Cluster
	client.until("b's api through b's ingress", 20*time.Second, func() bool {
		return client.get(xds.EndpointURL, apiCluster, &cla) && len(endpointsOf(&cla)) == 1 &&
			client.get(xds.ClusterURL, apiCluster, &apiC)
	})
	if got, want := endpointsOf(&cla), []lbEndpoint{{zone: "b", addr: ingressAddr, sni: apiSNI}}; !slices.Equal(got, want) {
		t.Errorf("endpoints of %s: %v, want %v", apiCluster, got, want)
	}
	if got := clusterSNIs(t, &apiC); !slices.Equal(got, []string{apiSNI}) {
		t.Errorf("TLS transport sockets of %s: SNIs %v, want [%s]", apiCluster, got, apiSNI)
	}

	// b's ingress proxy routes api's SNI (and echo's) to their local
	// clusters; secret, unexported, has neither chain nor cluster.
	ingTok := token(b, "ingress", "--name", "ingress-b")
	ingress := watchADS(t, ctx, b.xds, &corev3.Node{Id: "ingress-b", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"proxyType": structpb.NewStringValue("ingress"), "token": structpb.NewStringValue(ingTok)}}}, nil)
	var l listenerv3.Listener
	ingress.until("the ingress listener", 20*time.Second, func() bool {
		return ingress.get(xds.ListenerURL, "ingress:ingress-b", &l) && len(l.GetFilterChains()) == 2
	})
	want := map[string]string{apiSNI: "default:api_msvc_80", "echo.8080.b.default.mesh": "default:echo_msvc_8080"}
	if got := ingressChains(t, &l); !maps.Equal(got, want) {
		t.Errorf("b's ingress routes %v, want %v", got, want)
	}
	var local endpointv3.ClusterLoadAssignment
	ingress.until("api's local endpoint at b's ingress", 20*time.Second, func() bool {
		return ingress.get(xds.EndpointURL, "default:api_msvc_80", &local) && len(endpointsOf(&local)) == 1
	})
	if got := endpointsOf(&local); got[0].addr != "127.0.0.1:7001" || got[0].sni != "" {
		t.Errorf("b's ingress reaches api at %v, want 127.0.0.1:7001 in plain", got)
	}
	ingress.settle(300 * time.Millisecond)
	client.settle(300 * time.Millisecond)

	// inspect xds shows the ingress's proxy in its zone, and refuses it in
	// another, where it is a synced copy.
	out, stderr, err = run(t, ctx, nil, "inspect", "xds", "zoneingress", "ingress-b", "--server", b.api)
	for _, want := range []string{"zoneIngress: ingress-b", "protocol: delta", "name: ingress:ingress-b", "- " + apiSNI, "cluster: default:api_msvc_80"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("inspect xds zoneingress ingress-b in b: %v %s\nlacks %q:\n%s", err, stderr, want, out)
		}
	}
	synced := zonesync.HashedName(resource.ZoneIngress, "", "ingress-b", "b", "")
	if _, stderr, err = run(t, ctx, nil, "inspect", "xds", "zoneingress", synced, "--server", a.api); err == nil || !strings.Contains(stderr, "is no ingress of this zone") {
		t.Errorf("inspect xds zoneingress %s in a: %v %s; want it refused", synced, err, stderr)
	}
	for name, w := range map[string]*adsWatch{"a's client": client, "b's ingress": ingress} {
		for url, rs := range w.res {
			for n := range rs {
				if strings.Contains(n, "secret") {
					t.Errorf("%s got %s %s of the unexported secret", name, url, n)
				}
			}
		}
	}

	// echo-mz groups a's echo and b's: a's proxies get a's backend at
	// priority 0 and b's ingress at priority 1.
	if code := put(t, g.api, "/meshes/default/meshmultizoneservices/echo-mz", `{"type":"MeshMultiZoneService","name":"echo-mz","mesh":"default",
		"spec":{"selector":{"meshService":{"matchLabels":{"app":"echo"}}}}}`); code != http.StatusCreated {
		t.Fatalf("PUT echo-mz on the global = %d", code)
	}
	mzCluster := xds.ClusterName(resource.Key{Kind: resource.MeshMultiZoneService, Mesh: "default",
		Name: zonesync.HashedName(resource.MeshMultiZoneService, "default", "echo-mz", "", "")}, 8080)
	const echoSNI = "echo.8080.b.default.mesh"
	before := []lbEndpoint{{priority: 0, zone: "a", addr: fmt.Sprintf("127.0.0.1:%d", echoA)}, {priority: 1, zone: "b", addr: ingressAddr, sni: echoSNI}}
	client.until("echo-mz with a's backend and b's ingress", 30*time.Second, func() bool {
		return client.get(xds.EndpointURL, mzCluster, &cla) && slices.Equal(endpointsOf(&cla), before)
	})
	calls := startCaller(t, a.xds, "default.client", token(a, "dataplane", "--name", "client"), "xds:///echo-mz.mzsvc.mesh.local:8080")
	next := calls.waitFor(t, "a's backend answers echo-mz", 0, 30*time.Second, inARow("echo-a", 10))
	client.settle(300 * time.Millisecond)

	// a's backend turns NotReady: b's ingress is what is left, now the
	// first priority, on the watcher within 100 ms of the write's ACK.
	notReady := fmt.Sprintf(`{"type":"Dataplane","mesh":"default","name":"echo-a-1","networking":{"address":"127.0.0.1",
		"inbound":[{"name":"grpc","port":%d,"state":"NotReady","tags":{"kuma.io/service":"echo"}}]}}`, echoA)
	sent := time.Now()
	if code := put(t, a.api, "/meshes/default/dataplanes/echo-a-1", notReady); code != http.StatusOK {
		t.Fatalf("PUT echo-a-1 NotReady = %d", code)
	}
	acked := time.Now()
	after := []lbEndpoint{{priority: 0, zone: "b", addr: ingressAddr, sni: echoSNI}}
	arrived := client.until("echo-mz fails over to b's ingress", 10*time.Second, func() bool {
		return client.get(xds.EndpointURL, mzCluster, &cla) && slices.Equal(endpointsOf(&cla), after)
	})
	took := max(arrived.Sub(acked), 0) // it may come before the write's response does
	t.Logf("b's ingress reached a's proxy %s after the write was sent, %s after its acknowledgement", arrived.Sub(sent), took)
	if took > 100*time.Millisecond {
		t.Errorf("b's ingress reached a's proxy %s after the write was acknowledged, want at most 100 ms", took)
	}
	// The gRPC client follows: its calls go to the endpoint at b's ingress.
	calls.waitFor(t, "the client calls through b's ingress", next, 30*time.Second, inARow("b-ingress", 10))
}

// inARow holds once n lines in a row are want.
func inARow(want string, n int) func([]string) (int, bool) {
	return func(ls []string) (int, bool) {
		run := 0
		for i, l := range ls {
			if l == want {
				run++
			} else {
				run = 0
			}
			if run == n {
				return i + 1, true
			}
		}
		return 0, false
	}
}
