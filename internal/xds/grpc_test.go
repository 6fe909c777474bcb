package xds

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	xdsgrpc "google.golang.org/grpc/xds"

	"github.com/meshnames/meshnames/internal/resource"
)

// backend is a real gRPC server that answers UnaryCall with its id.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	id   string
	port int
}

func (b *backend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: b.id}, nil
}

func startBackend(t *testing.T, id string) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	b := &backend{id: id, port: ln.Addr().(*net.TCPAddr).Port}
	testgrpc.RegisterTestServiceServer(g, b)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return b
}

// xdsClient dials target through a grpc-go xDS resolver whose bootstrap
// names the env's ADS server and node id default.<dataplane>.
func xdsClient(t *testing.T, e *env, dataplane, target string) testgrpc.TestServiceClient {
	t.Helper()
	return xdsClientNode(t, e, "default."+dataplane, target)
}

// xdsClientNode is xdsClient with the node id given in full.
func xdsClientNode(t *testing.T, e *env, node, target string) testgrpc.TestServiceClient {
	t.Helper()
	bootstrap := fmt.Sprintf(`{"xds_servers":[{"server_uri":%q,"channel_creds":[{"type":"insecure"}],"server_features":["xds_v3"]}],"node":{"id":%q}}`, e.addr, node)
	r, err := xdsgrpc.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///"+target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// call makes one call and returns the server id, or the error.
func call(ctx context.Context, c testgrpc.TestServiceClient) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if err != nil {
		return "", err
	}
	return r.GetServerId(), nil
}

// until calls c until ok(id, err) holds, for at most 10 s.
func until(t *testing.T, what string, c testgrpc.TestServiceClient, ok func(string, error) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		id, err := call(context.Background(), c)
		if ok(id, err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last call gave %q, %v", what, id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGRPC_ProxylessClientCallsThroughNames is the proxyless path end to
// end in one process: grpc-go's own xDS client dials a MeshService by its
// hostname, is balanced over both Ready backends, follows a backend going
// NotReady, reaches a service created while it runs, and fails clearly
// once the service is deleted.
func TestGRPC_ProxylessClientCallsThroughNames(t *testing.T) {
	e := newEnv(t, nil)
	a, b := startBackend(t, "a"), startBackend(t, "b")
	e.dataplane("backend-a", "echo", a.port)
	e.dataplane("backend-b", "echo", b.port)
	e.dataplane("client", "client", 9999)
	e.service("echo", "241.0.0.1", []string{"echo.svc.mesh.local"}, grpcPort("grpc"))

	c := xdsClient(t, e, "client", "echo.svc.mesh.local:8080")
	seen := map[string]bool{}
	until(t, "both backends answer", c, func(id string, err error) bool {
		if err == nil {
			seen[id] = true
		}
		return seen["a"] && seen["b"]
	})

	e.update(resource.Key{Kind: resource.Dataplane, Mesh: "default", Name: "backend-b"}, func(o *resource.Object) {
		o.Spec.(*resource.DataplaneSpec).Networking.Inbound[0].State = resource.InboundNotReady
	})
	untilOnly(t, "NotReady b takes no calls", c, "a")

	// A service created while the client runs is callable at once.
	late := startBackend(t, "late")
	e.dataplane("backend-late", "late", late.port)
	e.service("late", "241.0.0.2", []string{"late.svc.mesh.local"}, grpcPort("grpc"))
	lc := xdsClient(t, e, "client", "late.svc.mesh.local:8080")
	until(t, "the new service answers", lc, func(id string, err error) bool { return err == nil && id == "late" })

	// Deleting it fails the next call, with a status that says why.
	e.delete(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "late"})
	until(t, "the deleted service fails", lc, func(id string, err error) bool {
		return err != nil && strings.Contains(status.Convert(err).Message(), "late.svc.mesh.local:8080")
	})
}

// untilOnly calls c until a call reaches backend id and the twenty after
// it do too: the others are gone from the endpoints, not merely less
// likely.
func untilOnly(t *testing.T, what string, c testgrpc.TestServiceClient, id string) {
	t.Helper()
	until(t, what, c, func(got string, err error) bool {
		if err != nil || got != id {
			return false
		}
		for range 20 {
			if got, err := call(context.Background(), c); err != nil || got != id {
				return false
			}
		}
		return true
	})
}
