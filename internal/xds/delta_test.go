package xds

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshnames/meshnames/internal/resource"
)

// deltaClient is a delta ADS client that applies what it receives to
// its own state: name -> version, per type. It ACKs every response (or
// NACKs those nack says to).
type deltaClient struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]
	state  map[string]map[string]string // type URL -> name -> version
	nack   func(*discovery.DeltaDiscoveryResponse) string
	got    chan *discovery.DeltaDiscoveryResponse
	end    error // why the stream ended, set before got is closed
	// last holds the load assignments received, by name; listeners the
	// listeners.
	last      map[string]*endpointv3.ClusterLoadAssignment
	listeners map[string]*listenerv3.Listener
}

func dialADS(t *testing.T, addr string) discovery.AggregatedDiscoveryServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return discovery.NewAggregatedDiscoveryServiceClient(cc)
}

// newDeltaClient opens a delta stream as node and subscribes to every
// type with a wildcard, giving initial versions when initial is set.
func newDeltaClient(t *testing.T, e *env, node string, initial map[string]map[string]string) *deltaClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return newDeltaClientInitial(t, ctx, e, node, initial)
}

// newDeltaClientCtx is a delta client whose stream ends with ctx.
func newDeltaClientCtx(t *testing.T, ctx context.Context, e *env, node string) *deltaClient {
	t.Helper()
	return newDeltaClientInitial(t, ctx, e, node, nil)
}

func newDeltaClientInitial(t *testing.T, ctx context.Context, e *env, node string, initial map[string]map[string]string) *deltaClient {
	t.Helper()
	return newDeltaClientNode(t, ctx, e, &corev3.Node{Id: node}, initial)
}

// newDeltaClientNode is a delta client that sends node (with its
// metadata) in its first requests.
func newDeltaClientNode(t *testing.T, ctx context.Context, e *env, node *corev3.Node, initial map[string]map[string]string) *deltaClient {
	t.Helper()
	s, err := dialADS(t, e.addr).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &deltaClient{t: t, stream: s, state: map[string]map[string]string{}, got: make(chan *discovery.DeltaDiscoveryResponse, 64),
		last: map[string]*endpointv3.ClusterLoadAssignment{}, listeners: map[string]*listenerv3.Listener{}}
	for _, url := range typeURLs {
		c.state[url] = maps.Clone(initial[url])
		if c.state[url] == nil {
			c.state[url] = map[string]string{}
		}
		if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: url, InitialResourceVersions: initial[url]}); err != nil {
			t.Fatal(err)
		}
	}
	go c.recv()
	return c
}

func (c *deltaClient) recv() {
	for {
		r, err := c.stream.Recv()
		if err != nil {
			c.end = err
			close(c.got)
			return
		}
		c.got <- r
	}
}

// next receives one response, applies it unless it is NACKed, and answers.
func (c *deltaClient) next(timeout time.Duration) *discovery.DeltaDiscoveryResponse {
	c.t.Helper()
	select {
	case r, ok := <-c.got:
		if !ok {
			c.t.Fatalf("the stream ended: %v", c.end)
		}
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}
		if c.nack != nil {
			if msg := c.nack(r); msg != "" {
				req.ErrorDetail = &statuspb.Status{Code: 3, Message: msg}
			}
		}
		if req.ErrorDetail == nil {
			st := c.state[r.GetTypeUrl()]
			for _, res := range r.GetResources() {
				st[res.GetName()] = res.GetVersion()
				if cla := new(endpointv3.ClusterLoadAssignment); r.GetTypeUrl() == EndpointURL && res.GetResource().UnmarshalTo(cla) == nil {
					c.last[res.GetName()] = cla
				}
				if l := new(listenerv3.Listener); r.GetTypeUrl() == ListenerURL && res.GetResource().UnmarshalTo(l) == nil {
					c.listeners[res.GetName()] = l
				}
			}
			for _, n := range r.GetRemovedResources() {
				delete(st, n)
			}
		}
		if err := c.stream.Send(req); err != nil {
			c.t.Fatal(err)
		}
		return r
	case <-time.After(timeout):
		return nil
	}
}

// settle applies responses until none comes for a while, and returns
// how many came.
func (c *deltaClient) settle() int {
	n := 0
	for c.next(300*time.Millisecond) != nil {
		n++
	}
	return n
}

// sotwState fetches what a state-of-the-world client gets for every type
// (wildcard), as name -> version.
func sotwState(t *testing.T, e *env, node string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, url := range typeURLs {
		st := map[string]string{}
		for _, m := range fetch(t, e, node, url) {
			b, _ := protoMarshal(m)
			st[nameOf(m)] = version(b)
		}
		out[url] = st
	}
	return out
}

// TestDelta_EndsWithTheStateOfTheWorld drives a delta client through
// creations, endpoint changes, a port change and deletions, and checks
// after each that what it applied is exactly what a state-of-the-world
// client gets; a reconnect with its versions sends only what changed
// while it was away.
func TestDelta_EndsWithTheStateOfTheWorld(t *testing.T) {
	e := newEnv(t, nil)
	e.dataplane("client", "client", 9999)
	e.dataplane("web-1", "web", 7001)
	e.service("web", "241.0.0.1", []string{"web.svc.mesh.local"}, grpcPort("grpc"))
	c := newDeltaClient(t, e, "default.client", nil)
	check := func(step string) {
		t.Helper()
		c.settle()
		want := sotwState(t, e, "default.client")
		// The delta client holds no API listeners (it subscribed by
		// wildcard); a SotW wildcard client holds none either.
		if d := cmp.Diff(want, c.state); d != "" {
			t.Fatalf("%s: delta state differs from the state of the world (-sotw +delta):\n%s", step, d)
		}
	}
	check("initial")
	if len(c.state[ClusterURL]) != 1 || len(c.state[ListenerURL]) != 1 {
		t.Fatalf("initial state %v: want web's cluster and outbound listener", c.state)
	}

	e.dataplane("web-2", "web", 7002)
	check("an endpoint added")
	e.service("api", "241.0.0.2", []string{"api.svc.mesh.local"}, grpcPort("grpc"))
	check("a service created")
	e.update(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "api"}, func(o *resource.Object) {
		o.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 9090
	})
	check("a port changed")
	e.delete(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "web"})
	check("a service deleted")

	// Reconnect with what it holds, after a change it missed: only that
	// change comes.
	held := map[string]map[string]string{}
	for k, v := range c.state {
		held[k] = maps.Clone(v)
	}
	e.dataplane("api-1", "api", 7003)
	re := newDeltaClient(t, e, "default.client", held)
	var resources, removed []string
	for {
		r := re.next(300 * time.Millisecond)
		if r == nil {
			break
		}
		for _, res := range r.GetResources() {
			resources = append(resources, res.GetName())
		}
		removed = append(removed, r.GetRemovedResources()...)
	}
	if !slices.Equal(resources, []string{"api_msvc_9090"}) || len(removed) != 0 {
		t.Errorf("a reconnect with current versions got %v, removed %v; want only the changed load assignment", resources, removed)
	}
	if d := cmp.Diff(sotwState(t, e, "default.client"), re.state); d != "" {
		t.Errorf("after the reconnect (-sotw +delta):\n%s", d)
	}
}

// TestDelta_NackIsKeptAndNotResent: a rejected response is kept with its
// reason and not sent again; the next change is sent, and its ACK clears
// the NACK.
func TestDelta_NackIsKeptAndNotResent(t *testing.T) {
	e := newEnv(t, nil)
	e.dataplane("client", "client", 9999)
	c := newDeltaClient(t, e, "default.client", nil)
	c.settle()
	c.nack = func(r *discovery.DeltaDiscoveryResponse) string {
		if r.GetTypeUrl() == ClusterURL && len(r.GetResources()) > 0 {
			return "cluster rejected for the test"
		}
		return ""
	}
	e.service("web", "241.0.0.1", nil, grpcPort("grpc"))
	if n := c.settle(); n == 0 {
		t.Fatal("no response to the new service")
	}
	in, err := e.srv.Inspect(Proxy{Mesh: "default", Name: "client"})
	if err != nil {
		t.Fatal(err)
	}
	var cds *struct{ msg string }
	for _, ty := range in.Streams[0].Types {
		if ty.Type == "CDS" && ty.Nack != nil {
			cds = &struct{ msg string }{ty.Nack.Message}
		}
	}
	if cds == nil || cds.msg != "cluster rejected for the test" {
		t.Fatalf("inspection after a NACK: %+v", in.Streams)
	}
	// Nothing more comes for the NACKed version: no resend loop.
	if r := c.next(500 * time.Millisecond); r != nil {
		t.Fatalf("after a NACK the server sent %s %v again", r.GetTypeUrl(), r.GetResources())
	}
	c.nack = nil
	e.service("api", "241.0.0.2", nil, grpcPort("grpc"))
	c.settle()
	in, _ = e.srv.Inspect(Proxy{Mesh: "default", Name: "client"})
	for _, ty := range in.Streams[0].Types {
		if ty.Nack != nil || ty.AckedVersion == "" || ty.Pending {
			t.Errorf("after an ACK, %s: %+v", ty.Type, ty)
		}
	}
}

func nameOf(m any) string {
	if n, ok := m.(interface{ GetName() string }); ok {
		return n.GetName()
	}
	if n, ok := m.(interface{ GetClusterName() string }); ok {
		return n.GetClusterName()
	}
	panic(fmt.Sprintf("no name: %T", m))
}
