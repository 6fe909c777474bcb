package xds

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/meshnames/meshnames/internal/kubexds"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/token"
)

// fakeSlices is a ServiceEndpoints whose endpoints the test sets.
type fakeSlices struct {
	mu     sync.Mutex
	eps    map[kubexds.ServiceName]map[string][]podEndpoint // Service -> port name -> endpoints
	subs   []func(kubexds.ServiceName)
	synced chan struct{}
}

type podEndpoint struct {
	kubexds.Endpoint
	pod string
}

func newFakeSlices() *fakeSlices {
	f := &fakeSlices{eps: map[kubexds.ServiceName]map[string][]podEndpoint{}, synced: make(chan struct{})}
	close(f.synced)
	return f
}

func (f *fakeSlices) Synced() <-chan struct{} { return f.synced }

func (f *fakeSlices) Subscribe(fn func(kubexds.ServiceName)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, fn)
	return func() {}
}

func (f *fakeSlices) Endpoints(svc kubexds.ServiceName, pod, port string) []kubexds.Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []kubexds.Endpoint
	for _, e := range f.eps[svc][port] {
		if pod == "" || e.pod == pod {
			out = append(out, e.Endpoint)
		}
	}
	return out
}

// set replaces the endpoints of svc and tells the subscribers.
func (f *fakeSlices) set(svc kubexds.ServiceName, eps map[string][]podEndpoint) {
	f.mu.Lock()
	f.eps[svc] = eps
	subs := slices.Clone(f.subs)
	f.mu.Unlock()
	for _, fn := range subs {
		fn(svc)
	}
}

func ep(pod, addr string, draining bool) podEndpoint {
	return podEndpoint{Endpoint: kubexds.Endpoint{Addr: netip.MustParseAddrPort(addr), Draining: draining}, pod: pod}
}

// kubeService creates the MeshService the Service controller makes of
// Service ns/name (headless: of its Pod pod), with a VIP.
func (e *env) kubeService(name, ns, pod, vip string, ports ...resource.Port) {
	e.t.Helper()
	labels := map[string]string{resource.LabelManagedBy: resource.ManagedByKubernetes, resource.LabelNamespace: ns,
		resource.LabelServiceName: name, resource.LabelHeadless: "false"}
	spec := &resource.MeshServiceSpec{Selector: resource.MeshServiceSelector{DataplaneLabels: &resource.LabelSelector{MatchLabels: map[string]string{"app": name}}}, Ports: ports}
	msName := name + "." + ns
	if pod != "" {
		labels[resource.LabelHeadless] = "true"
		spec.Selector = resource.MeshServiceSelector{DataplaneRef: &resource.DataplaneRef{Name: pod + "." + ns}}
		msName = pod + "-x." + ns
	}
	o := e.create(&resource.Object{Kind: resource.MeshService, Mesh: "default", Name: msName, Labels: labels, Spec: spec})
	o.Status = &resource.ServiceStatus{VIPs: []resource.VIP{{IP: vip, Type: resource.VIPKubernetes}}}
	e.updateStatus(o)
}

// endpointsOf renders the load assignment name the client holds as
// "address:port STATUS", sorted.
func endpointsOf(c *deltaClient, name string) []string {
	var out []string
	for _, l := range c.last[name].GetEndpoints() {
		for _, lb := range l.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, fmt.Sprintf("%s:%d %s", sa.GetAddress(), sa.GetPortValue(), lb.GetHealthStatus()))
		}
	}
	slices.Sort(out)
	return out
}

// waitEndpoints applies what the client receives until the load
// assignment name holds want.
func waitEndpoints(t *testing.T, c *deltaClient, name string, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(endpointsOf(c, name), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: endpoints %q, want %q", name, endpointsOf(c, name), want)
		}
		c.next(100 * time.Millisecond)
	}
}

// TestKube_SliceEndpointsReachTheProxy: the MeshServices made from
// Services take their endpoints from the Services' EndpointSlices, port
// by port name, and every change of them reaches a connected proxy: a
// ready endpoint is HEALTHY, a terminating one that serves DRAINING, one
// that does neither is gone. A headless Service's MeshService takes only
// its Pod's endpoints; a MeshService written by hand still takes its
// Dataplanes'.
func TestKube_SliceEndpointsReachTheProxy(t *testing.T) {
	f := newFakeSlices()
	web := kubexds.ServiceName{Namespace: "shop", Name: "web"}
	db := kubexds.ServiceName{Namespace: "shop", Name: "db"}
	f.set(web, map[string][]podEndpoint{
		"http":  {ep("web-a", "10.0.0.1:8080", false), ep("web-b", "10.0.0.2:8081", false)},
		"admin": {ep("web-a", "10.0.0.1:9901", false)},
	})
	f.set(db, map[string][]podEndpoint{"": {ep("db-0", "10.0.1.1:5432", false), ep("db-1", "10.0.1.2:5432", false)}})
	e := newEnvWith(t, func(b *Builder) { b.Slices = f })
	e.dataplane("client", "client", 9999)
	e.dataplane("legacy-1", "legacy", 7001)
	e.service("legacy", "241.0.0.9", nil, grpcPort("grpc"))
	e.kubeService("web", "shop", "", "10.96.0.10",
		resource.Port{Name: "http", Port: 80, TargetPort: &resource.IntOrString{String: "http", IsName: true}, AppProtocol: resource.ProtocolHTTP},
		resource.Port{Name: "admin", Port: 9000, TargetPort: &resource.IntOrString{Int: 9901}, AppProtocol: resource.ProtocolTCP})
	e.kubeService("db", "shop", "db-1", "10.0.1.2", resource.Port{Port: 5432, AppProtocol: resource.ProtocolTCP})
	c := newDeltaClient(t, e, "default.client", nil)

	const http, admin, headless, legacy = "web.shop_msvc_80", "web.shop_msvc_9000", "db-1-x.shop_msvc_5432", "legacy_msvc_8080"
	waitEndpoints(t, c, http, []string{"10.0.0.1:8080 HEALTHY", "10.0.0.2:8081 HEALTHY"})
	waitEndpoints(t, c, admin, []string{"10.0.0.1:9901 HEALTHY"})
	waitEndpoints(t, c, headless, []string{"10.0.1.2:5432 HEALTHY"})
	waitEndpoints(t, c, legacy, []string{"127.0.0.1:7001 HEALTHY"})

	for _, step := range []struct {
		name string
		http []podEndpoint
		want []string
	}{
		{"web-b terminating and serving", []podEndpoint{ep("web-a", "10.0.0.1:8080", false), ep("web-b", "10.0.0.2:8081", true)},
			[]string{"10.0.0.1:8080 HEALTHY", "10.0.0.2:8081 DRAINING"}},
		{"web-a not ready, web-c added", []podEndpoint{ep("web-b", "10.0.0.2:8081", true), ep("web-c", "10.0.0.3:8080", false)},
			[]string{"10.0.0.2:8081 DRAINING", "10.0.0.3:8080 HEALTHY"}},
		{"web-b gone", []podEndpoint{ep("web-c", "10.0.0.3:8080", false)},
			[]string{"10.0.0.3:8080 HEALTHY"}},
		{"no endpoint", nil, nil},
	} {
		f.set(web, map[string][]podEndpoint{"http": step.http, "admin": {ep("web-a", "10.0.0.1:9901", false)}})
		waitEndpoints(t, c, http, step.want)
	}
	if got := endpointsOf(c, admin); !slices.Equal(got, []string{"10.0.0.1:9901 HEALTHY"}) {
		t.Errorf("the other port's endpoints are %q after the http port's changed", got)
	}
	if d := cmp.Diff(sotwState(t, e, "default.client"), c.state); d != "" {
		t.Errorf("delta state differs from the state of the world (-sotw +delta):\n%s", d)
	}
}

// fakePods is a PodIdentity over fixed Pods and reviews.
type fakePods struct {
	pods    map[string]kubexds.Pod    // namespace/name -> Pod
	reviews map[string]kubexds.Review // token -> review
}

func (f fakePods) Get(_ context.Context, ns, name string) (kubexds.Pod, error) {
	if ns == "down" {
		return kubexds.Pod{}, errors.New("connection refused")
	}
	p, ok := f.pods[ns+"/"+name]
	if !ok {
		return kubexds.Pod{}, kubexds.ErrNoPod
	}
	return p, nil
}

func (f fakePods) Review(_ context.Context, raw string) (kubexds.Review, error) {
	r, ok := f.reviews[raw]
	if !ok {
		return kubexds.Review{}, errors.New("the API server is away")
	}
	return r, nil
}

// bearer is the authorization header of tok.
func bearer(tok string) metadata.MD { return metadata.Pairs("authorization", "Bearer "+tok) }

// saToken is a JWT of a Kubernetes issuer (its signature is the API
// server's business: the fake reviews it by its text).
func saToken(sub string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc([]byte(`{"iss":"https://kubernetes.default.svc","sub":"`+sub+`"}`)) + ".c2ln"
}

// TestAuthenticator_Pods takes the ways a Pod's proxy is accepted and
// refused in env kubernetes.
func TestAuthenticator_Pods(t *testing.T) {
	k := testKeys(t)
	web1 := kubexds.Pod{Namespace: "shop", Name: "web-1", UID: "uid-1", ServiceAccount: "web", Mesh: "default"}
	pods := fakePods{
		pods: map[string]kubexds.Pod{
			"shop/web-1": web1, "shop/web-2": {Namespace: "shop", Name: "web-2", UID: "uid-2", ServiceAccount: "web", Mesh: "default"},
			"shop/api.v2": {Namespace: "shop", Name: "api.v2", UID: "uid-3", ServiceAccount: "default", Mesh: "default"},
			"lab/x-1":     {Namespace: "lab", Name: "x-1", UID: "uid-4", ServiceAccount: "default", Mesh: "ghost"},
		},
		reviews: map[string]kubexds.Review{
			saToken("web"):     {Authenticated: true, User: "system:serviceaccount:shop:web"},
			saToken("bound-1"): {Authenticated: true, User: "system:serviceaccount:shop:web", PodName: "web-1", PodUID: "uid-1"},
			saToken("stale-1"): {Authenticated: true, User: "system:serviceaccount:shop:web", PodName: "web-1", PodUID: "uid-0"},
			saToken("other"):   {Authenticated: true, User: "system:serviceaccount:shop:other"},
			saToken("default"): {Authenticated: true, User: "system:serviceaccount:shop:default"},
			saToken("lab"):     {Authenticated: true, User: "system:serviceaccount:lab:default"},
			saToken("expired"): {Error: "token has expired"},
		},
	}
	dataplanes := map[Proxy]bool{{Mesh: "default", Name: "dp-1"}: true}
	a := &Authenticator{Keys: k, LoopbackTokenless: true, Exists: func(p Proxy) bool { return dataplanes[p] }, Pods: pods,
		MeshExists: func(m string) bool { return m == "default" || m == "prod" }}
	dpToken := func(mesh, name string) string {
		return sign(t, k, token.Claims{Subject: name, Role: token.RoleDataplane, Meshes: []string{mesh}})
	}
	pod := func(name string) Proxy { return Proxy{Mesh: "default", Name: name, Pod: true} }
	runChecks(t, a, []checkCase{
		{name: "service-account-token", from: "192.0.2.7", md: bearer(saToken("web")), node: nodeWith("web-1.shop", ""), want: pod("web-1.shop")},
		{name: "bound-token", from: "192.0.2.7", md: bearer(saToken("bound-1")), node: nodeWith("web-1.shop", ""), want: pod("web-1.shop")},
		{name: "dotted-pod-name", from: "192.0.2.7", md: bearer(saToken("default")), node: nodeWith("api.v2.shop", ""), want: pod("api.v2.shop")},
		{name: "dataplane-token-for-the-pod", from: "192.0.2.7", md: bearer(dpToken("default", "web-1.shop")), node: nodeWith("web-1.shop", ""), want: pod("web-1.shop")},
		{name: "loopback-tokenless", from: "127.0.0.1", node: nodeWith("web-2.shop", ""), want: pod("web-2.shop")},
		{name: "dataplane-first", from: "127.0.0.1", node: nodeWith("default.dp-1", ""), want: Proxy{Mesh: "default", Name: "dp-1"}},
		{name: "dataplane-token-for-a-dataplane", from: "192.0.2.7", md: bearer(dpToken("default", "dp-1")), node: nodeWith("default.dp-1", ""), want: Proxy{Mesh: "default", Name: "dp-1"}},
		{name: "another-service-account", from: "192.0.2.7", md: bearer(saToken("other")), node: nodeWith("web-1.shop", ""), code: codes.PermissionDenied, reason: "other_service_account"},
		{name: "another-namespace", from: "192.0.2.7", md: bearer(saToken("lab")), node: nodeWith("web-1.shop", ""), code: codes.PermissionDenied, reason: "other_service_account"},
		{name: "bound-to-another-pod", from: "192.0.2.7", md: bearer(saToken("bound-1")), node: nodeWith("web-2.shop", ""), code: codes.PermissionDenied, reason: "other_pod"},
		{name: "bound-to-a-deleted-pod-of-the-name", from: "192.0.2.7", md: bearer(saToken("stale-1")), node: nodeWith("web-1.shop", ""), code: codes.PermissionDenied, reason: "other_pod"},
		{name: "not-authenticated", from: "192.0.2.7", md: bearer(saToken("expired")), node: nodeWith("web-1.shop", ""), code: codes.Unauthenticated, reason: "not_authenticated"},
		{name: "review-unavailable", from: "192.0.2.7", md: bearer(saToken("unknown")), node: nodeWith("web-1.shop", ""), code: codes.Unavailable, reason: "kubernetes_unavailable"},
		{name: "pods-unavailable", from: "192.0.2.7", md: bearer(saToken("web")), node: nodeWith("web-1.down", ""), code: codes.Unavailable, reason: "kubernetes_unavailable"},
		{name: "unknown-pod", from: "192.0.2.7", md: bearer(saToken("web")), node: nodeWith("web-9.shop", ""), code: codes.PermissionDenied, reason: "unknown_pod"},
		{name: "unknown-pod-tokenless", from: "127.0.0.1", node: nodeWith("web-9.shop", ""), code: codes.PermissionDenied, reason: "unknown_pod"},
		{name: "tokenless-off-loopback", from: "192.0.2.7", node: nodeWith("web-1.shop", ""), code: codes.Unauthenticated, reason: "missing"},
		{name: "dataplane-token-of-another-mesh", from: "192.0.2.7", md: bearer(dpToken("prod", "web-1.shop")), node: nodeWith("web-1.shop", ""), code: codes.PermissionDenied, reason: "other_mesh"},
		{name: "dataplane-token-of-another-pod", from: "192.0.2.7", md: bearer(dpToken("default", "web-2.shop")), node: nodeWith("web-1.shop", ""), code: codes.PermissionDenied, reason: "other_dataplane"},
		{name: "mesh-does-not-exist", from: "192.0.2.7", md: bearer(saToken("lab")), node: nodeWith("x-1.lab", ""), code: codes.PermissionDenied, reason: "unknown_mesh"},
		{name: "pod-in-a-namespace-of-its-last-label", from: "127.0.0.1", node: nodeWith("web-1.shop.x", ""), code: codes.PermissionDenied, reason: "unknown_pod"},
		{name: "no-namespace", from: "127.0.0.1", node: nodeWith("web-1", ""), code: codes.InvalidArgument, reason: "bad_node_id"},
		{name: "garbage-token", from: "192.0.2.7", md: bearer("not.a.token"), node: nodeWith("web-1.shop", ""), code: codes.Unauthenticated, reason: "malformed"},
	})
}

// TestGRPC_PodCallsReadyEndpointsOnly: a proxyless gRPC client connected
// as a Pod calls a Service's ready endpoints, and none that is draining
// (grpc-go leaves DRAINING endpoints out).
func TestGRPC_PodCallsReadyEndpointsOnly(t *testing.T) {
	f := newFakeSlices()
	a, b := startBackend(t, "a"), startBackend(t, "b")
	echo := kubexds.ServiceName{Namespace: "shop", Name: "echo"}
	at := func(be *backend, draining bool) podEndpoint {
		return ep(be.id, fmt.Sprintf("127.0.0.1:%d", be.port), draining)
	}
	f.set(echo, map[string][]podEndpoint{"grpc": {at(a, false), at(b, false)}})
	pods := fakePods{pods: map[string]kubexds.Pod{"shop/caller": {Namespace: "shop", Name: "caller", ServiceAccount: "default", Mesh: "default"}}}
	auth := &Authenticator{LoopbackTokenless: true, Pods: pods}
	e := newEnvAuth(t, auth, func(b *Builder) { b.Slices = f })
	auth.MeshExists = e.b.MeshExists
	e.kubeService("echo", "shop", "", "10.96.0.20", resource.Port{Name: "grpc", Port: 8080, TargetPort: &resource.IntOrString{String: "grpc", IsName: true}, AppProtocol: resource.ProtocolGRPC})
	o, err := e.st.Get(e.ctx, resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "echo.shop"})
	if err != nil {
		t.Fatal(err)
	}
	st := o.Status.(*resource.ServiceStatus)
	st.Addresses = []resource.Address{{Hostname: "echo.shop.svc.mesh.local", Status: resource.AddressAvailable,
		Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "gen"}}}
	e.updateStatus(o)

	c := xdsClientNode(t, e, "caller.shop", "echo.shop.svc.mesh.local:8080")
	seen := map[string]bool{}
	until(t, "both endpoints answer", c, func(id string, err error) bool {
		if err == nil {
			seen[id] = true
		}
		return seen["a"] && seen["b"]
	})
	f.set(echo, map[string][]podEndpoint{"grpc": {at(a, false), at(b, true)}})
	untilOnly(t, "draining b takes no calls", c, "a")
}
