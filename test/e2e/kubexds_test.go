package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/xds"
)

// edsWatch is a simulated proxy: a delta ADS stream that subscribes to
// clusters and load assignments, ACKs everything and keeps the load
// assignments it holds.
type edsWatch struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]
	mu     sync.Mutex
	cla    map[string]*endpointv3.ClusterLoadAssignment
	more   chan struct{}
	err    error // why the stream ended
}

// openEDS connects to addr as node with token (authorization: Bearer).
func openEDS(t *testing.T, addr, node, token string) *edsWatch {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token))
	t.Cleanup(cancel)
	s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &edsWatch{t: t, stream: s, cla: map[string]*endpointv3.ClusterLoadAssignment{}, more: make(chan struct{}, 1)}
	for _, url := range []string{xds.ClusterURL, xds.EndpointURL} {
		if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: url}); err != nil {
			t.Fatal(err)
		}
	}
	go w.recv()
	return w
}

func (w *edsWatch) recv() {
	defer close(w.more)
	for {
		r, err := w.stream.Recv()
		if err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		for _, res := range r.GetResources() {
			cla := new(endpointv3.ClusterLoadAssignment)
			if r.GetTypeUrl() == xds.EndpointURL && res.GetResource().UnmarshalTo(cla) == nil {
				w.cla[res.GetName()] = cla
			}
		}
		for _, n := range r.GetRemovedResources() {
			delete(w.cla, n)
		}
		w.mu.Unlock()
		if err := w.stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}); err != nil {
			return
		}
		select {
		case w.more <- struct{}{}:
		default:
		}
	}
}

// endpoints renders the load assignment name as "address:port STATUS",
// sorted.
func (w *edsWatch) endpoints(name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, l := range w.cla[name].GetEndpoints() {
		for _, lb := range l.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, fmt.Sprintf("%s:%d %s", sa.GetAddress(), sa.GetPortValue(), lb.GetHealthStatus()))
		}
	}
	slices.Sort(out)
	return out
}

// wait waits until the load assignment name holds want.
func (w *edsWatch) wait(what, name string, want ...string) {
	w.t.Helper()
	deadline := time.After(20 * time.Second)
	for !slices.Equal(w.endpoints(name), want) {
		select {
		case _, open := <-w.more:
			if !open {
				w.t.Fatalf("%s: the stream ended (%v) with %s holding %q", what, w.err, name, w.endpoints(name))
			}
		case <-deadline:
			w.t.Fatalf("%s: %s holds %q, want %q", what, name, w.endpoints(name), want)
		}
	}
}

// refusal opens a stream as node with token and returns how it ends; a
// stream that gets a response was served, which fails t.
func refusal(t *testing.T, addr, node, token string) *status.Status {
	t.Helper()
	w := openEDS(t, addr, node, token)
	select {
	case _, open := <-w.more:
		if open {
			t.Fatalf("the stream of %s was served", node)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the stream of %s was neither served nor refused", node)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return status.Convert(w.err)
}

// TestKube_ProxyEndpointsFromSlices runs meshnames in env kubernetes on a
// real API server, as the user bound to the roles of meshnames install
// control-plane. A Pod's proxy (a delta ADS stream) connects with the
// Pod's service-account token, bound to the Pod, and gets the endpoints
// of a Service's EndpointSlices port by port name (a named targetPort
// resolved differently in two slices); every change of the slices reaches
// it: a ready endpoint is HEALTHY, a terminating one that still serves
// DRAINING, a not ready one is left out, a new one and a deleted slice
// follow. Tokens of another service account, or bound to another Pod,
// and Pods that do not exist are refused with the reason.
func TestKube_ProxyEndpointsFromSlices(t *testing.T) {
	c := kube(t)
	const ns = "eds"
	meshedNamespace(t, c, ns)
	p := kubeServe(t, c, "kube")
	kubeApply(t, c, ns, `apiVersion: v1
kind: ServiceAccount
metadata: {name: web, namespace: $NS}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: other, namespace: $NS}
---
apiVersion: v1
kind: Pod
metadata: {name: client-1, namespace: $NS}
spec: {serviceAccountName: web, containers: [{name: app, image: example.invalid/app}]}
---
apiVersion: v1
kind: Pod
metadata: {name: client-2, namespace: $NS}
spec: {serviceAccountName: web, containers: [{name: app, image: example.invalid/app}]}
---
apiVersion: v1
kind: Service
metadata: {name: backend, namespace: $NS}
spec:
  selector: {app: backend}
  ports:
  - {name: http, port: 80, targetPort: http, appProtocol: http}
  - {name: admin, port: 9000, targetPort: 9901}
`)
	slice := func(name, ports string, endpoints ...string) string {
		return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s, namespace: $NS, labels: {kubernetes.io/service-name: backend}}
addressType: IPv4
ports: [%s]
endpoints: [%s]
`, name, ports, strings.Join(endpoints, ", "))
	}
	ep := func(pod, addr string, ready, serving, terminating bool) string {
		return fmt.Sprintf(`{addresses: [%s], conditions: {ready: %t, serving: %t, terminating: %t}, targetRef: {kind: Pod, name: %s, namespace: %s}}`,
			addr, ready, serving, terminating, pod, ns)
	}
	// Pods a and b name their http container port 8080, c 8081: the
	// EndpointSlice controller puts c in a slice of its own.
	kubeApply(t, c, ns, slice("backend-1", `{name: http, port: 8080, protocol: TCP}, {name: admin, port: 9901, protocol: TCP}`,
		ep("backend-a", "10.1.0.1", true, true, false), ep("backend-b", "10.1.0.2", true, true, false)))
	kubeApply(t, c, ns, slice("backend-2", `{name: http, port: 8081, protocol: TCP}, {name: admin, port: 9901, protocol: TCP}`,
		ep("backend-c", "10.1.0.3", true, true, false)))
	waitMS(t, p.api, "backend.eds", "a VIP", 20*time.Second, func(m *msView) bool { return m != nil && len(m.Status.VIPs) > 0 })

	ctx := t.Context()
	bound, err := c.ServiceAccountToken(ctx, ns, "web", "client-1")
	if err != nil {
		t.Fatal(err)
	}
	w := openEDS(t, p.xds, "client-1."+ns, bound)
	const http, admin = "backend.eds_msvc_80", "backend.eds_msvc_9000"
	w.wait("first config", http, "10.1.0.1:8080 HEALTHY", "10.1.0.2:8080 HEALTHY", "10.1.0.3:8081 HEALTHY")
	w.wait("first config", admin, "10.1.0.1:9901 HEALTHY", "10.1.0.2:9901 HEALTHY", "10.1.0.3:9901 HEALTHY")

	kubeApply(t, c, ns, slice("backend-1", `{name: http, port: 8080, protocol: TCP}, {name: admin, port: 9901, protocol: TCP}`,
		ep("backend-a", "10.1.0.1", false, false, false), ep("backend-b", "10.1.0.2", false, true, true), ep("backend-d", "10.1.0.4", true, true, false)))
	w.wait("a not ready, b terminating, d added", http, "10.1.0.2:8080 DRAINING", "10.1.0.3:8081 HEALTHY", "10.1.0.4:8080 HEALTHY")
	w.wait("a not ready, b terminating, d added", admin, "10.1.0.2:9901 DRAINING", "10.1.0.3:9901 HEALTHY", "10.1.0.4:9901 HEALTHY")
	if err := c.Client.Delete(ctx, kubeapi.EndpointSlices, ns, "backend-2", kubeapi.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	w.wait("slice backend-2 deleted", http, "10.1.0.2:8080 DRAINING", "10.1.0.4:8080 HEALTHY")

	other, err := c.ServiceAccountToken(ctx, ns, "other", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, node, token string
		code              codes.Code
		says              string
	}{
		{"another-service-account", "client-1." + ns, other, codes.PermissionDenied, "Pod eds/client-1 runs as service account web"},
		{"bound-to-another-pod", "client-2." + ns, bound, codes.PermissionDenied, "bound to Pod eds/client-1"},
		{"no-such-pod", "ghost." + ns, bound, codes.PermissionDenied, "no Pod eds/ghost exists"},
		{"not-a-token-of-this-cluster", "client-1." + ns, forgedToken(), codes.Unauthenticated, "does not accept the token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := refusal(t, p.xds, tc.node, tc.token)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.says) {
				t.Errorf("refused with %s %q, want %s saying %q", st.Code(), st.Message(), tc.code, tc.says)
			}
		})
	}
	// The refusals disturbed nothing: the proxy still follows the slices.
	kubeApply(t, c, ns, slice("backend-1", `{name: http, port: 8080, protocol: TCP}, {name: admin, port: 9901, protocol: TCP}`,
		ep("backend-d", "10.1.0.4", true, true, false)))
	w.wait("b gone", http, "10.1.0.4:8080 HEALTHY")
}

// forgedToken is shaped like a service-account token of the test
// cluster's issuer, signed by no key it knows.
func forgedToken() string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"forged"}`)) + "." +
		enc([]byte(`{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:eds:web","exp":4102444800}`)) + "." + enc([]byte("signature"))
}
