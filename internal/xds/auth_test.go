package xds

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/token"
)

// testKeys returns token keys over a fresh store.
func testKeys(t testing.TB) *token.Keys {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, err := token.LoadKeys(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sign(t testing.TB, k *token.Keys, c token.Claims) string {
	t.Helper()
	if c.ID == "" {
		c.ID = token.NewID()
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = time.Now().Add(-time.Minute)
	}
	if c.ExpiresAt.IsZero() {
		c.ExpiresAt = time.Now().Add(time.Hour)
	}
	raw, err := k.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func peerCtx(addr string, md metadata.MD) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(addr), Port: 40000}})
	if md != nil {
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	return ctx
}

func nodeWith(id, tok string) *corev3.Node {
	n := &corev3.Node{Id: id}
	if tok != "" {
		n.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"token": structpb.NewStringValue(tok)}}
	}
	return n
}

// TestAuthenticator_Check takes every way a stream can be refused one by
// one, and the ways it is accepted.
func TestAuthenticator_Check(t *testing.T) {
	k := testKeys(t)
	dataplanes := map[Proxy]bool{{Mesh: "default", Name: "web-1"}: true, {Mesh: "a.b", Name: "c"}: true, {Mesh: "a", Name: "b.d"}: true}
	a := &Authenticator{Keys: k, LoopbackTokenless: true, Exists: func(p Proxy) bool { return dataplanes[p] }}
	good := sign(t, k, token.Claims{Subject: "web-1", Role: token.RoleDataplane, Meshes: []string{"default"}})
	expired := sign(t, k, token.Claims{Subject: "web-1", Role: token.RoleDataplane, Meshes: []string{"default"},
		IssuedAt: time.Now().Add(-2 * time.Hour), ExpiresAt: time.Now().Add(-time.Hour)})
	if _, _, err := k.Issue(context.Background(), token.Claims{ID: "issued-2", Subject: "web-1", Role: token.RoleDataplane, Meshes: []string{"default"}, ExpiresAt: time.Now().Add(time.Hour)}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Revoke(context.Background(), "issued-2", "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	revokedIssued := sign(t, k, token.Claims{ID: "issued-2", Subject: "web-1", Role: token.RoleDataplane, Meshes: []string{"default"}})
	other := sign(t, k, token.Claims{Subject: "web-2", Role: token.RoleDataplane, Meshes: []string{"default"}})
	otherMesh := sign(t, k, token.Claims{Subject: "web-1", Role: token.RoleDataplane, Meshes: []string{"prod"}})
	admin := sign(t, k, token.Claims{Subject: "alice", Role: token.RoleAdmin})
	foreign := sign(t, testKeys(t), token.Claims{Subject: "web-1", Role: token.RoleDataplane, Meshes: []string{"default"}})

	runChecks(t, a, []checkCase{
		{name: "loopback-tokenless", from: "127.0.0.1", node: nodeWith("default.web-1", ""), want: Proxy{Mesh: "default", Name: "web-1"}},
		{name: "header-token", from: "192.0.2.7", md: metadata.Pairs("authorization", "Bearer "+good), node: nodeWith("default.web-1", ""), want: Proxy{Mesh: "default", Name: "web-1"}},
		{name: "metadata-token", from: "192.0.2.7", node: nodeWith("default.web-1", good), want: Proxy{Mesh: "default", Name: "web-1"}},
		{name: "dotted-mesh", from: "127.0.0.1", node: nodeWith("a.b.c", ""), want: Proxy{Mesh: "a.b", Name: "c"}},
		{name: "no-node", from: "127.0.0.1", node: nil, code: codes.InvalidArgument, reason: "no_node"},
		{name: "empty-id", from: "127.0.0.1", node: nodeWith("", ""), code: codes.InvalidArgument, reason: "bad_node_id"},
		{name: "id-without-dot", from: "127.0.0.1", node: nodeWith("web-1", ""), code: codes.InvalidArgument, reason: "bad_node_id"},
		{name: "id-upper-case", from: "127.0.0.1", node: nodeWith("Default.Web", ""), code: codes.InvalidArgument, reason: "bad_node_id"},
		{name: "id-too-long", from: "127.0.0.1", node: nodeWith("a."+strings.Repeat("b", 600), ""), code: codes.InvalidArgument, reason: "bad_node_id"},
		{name: "unknown-dataplane", from: "127.0.0.1", node: nodeWith("default.ghost", ""), code: codes.PermissionDenied, reason: "unknown_dataplane"},
		{name: "off-loopback-tokenless", from: "192.0.2.7", node: nodeWith("default.web-1", ""), code: codes.Unauthenticated, reason: "missing"},
		{name: "malformed-header", from: "127.0.0.1", md: metadata.Pairs("authorization", "Token x"), node: nodeWith("default.web-1", ""), code: codes.Unauthenticated, reason: "malformed_header"},
		{name: "empty-metadata-token", from: "127.0.0.1", node: nodeWith("default.web-1", " "), code: codes.Unauthenticated, reason: "malformed_metadata"},
		{name: "garbage-token", from: "127.0.0.1", node: nodeWith("default.web-1", "not.a.token"), code: codes.Unauthenticated, reason: "malformed"},
		{name: "expired", from: "127.0.0.1", node: nodeWith("default.web-1", expired), code: codes.Unauthenticated, reason: "expired"},
		{name: "revoked", from: "127.0.0.1", node: nodeWith("default.web-1", revokedIssued), code: codes.Unauthenticated, reason: "revoked"},
		{name: "signed-elsewhere", from: "127.0.0.1", node: nodeWith("default.web-1", foreign), code: codes.Unauthenticated, reason: "signature"},
		{name: "another-dataplane", from: "127.0.0.1", node: nodeWith("default.web-1", other), code: codes.PermissionDenied, reason: "other_dataplane"},
		{name: "another-mesh", from: "127.0.0.1", node: nodeWith("default.web-1", otherMesh), code: codes.PermissionDenied, reason: "other_dataplane"},
		{name: "user-token", from: "127.0.0.1", node: nodeWith("default.web-1", admin), code: codes.PermissionDenied, reason: "role"},
		{name: "token-for-missing-dataplane", from: "192.0.2.7", node: nodeWith("default.web-2", other), code: codes.PermissionDenied, reason: "unknown_dataplane"},
	})
}

// checkCase is the first request of a stream, from an address, and what
// Check must answer: the proxy (code OK), or the refusal's code and
// reason.
type checkCase struct {
	name   string
	from   string
	md     metadata.MD
	node   *corev3.Node
	code   codes.Code
	reason string
	want   Proxy
}

func runChecks(t *testing.T, a *Authenticator, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, ref := a.Check(peerCtx(tc.from, tc.md), tc.node)
			if tc.code == codes.OK {
				if ref != nil || p != tc.want {
					t.Fatalf("Check = %v, %v; want %v accepted", p, ref, tc.want)
				}
				return
			}
			if ref == nil || ref.Code != tc.code || ref.Reason != tc.reason || ref.Msg == "" {
				t.Fatalf("Check = %v, %+v; want %s (%s)", p, ref, tc.code, tc.reason)
			}
		})
	}
}

// TestServer_RefusesBadStreamsAlone: a refused stream ends with its
// status, and a stream open beside it is not disturbed.
func TestServer_RefusesBadStreamsAlone(t *testing.T) {
	e := newEnv(t, nil)
	e.dataplane("client", "client", 9999)
	good := newDeltaClient(t, e, "default.client", nil)
	good.settle()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, node := range []string{"default.ghost", "nodot", ""} {
		s, err := dialADS(t, e.addr).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: ClusterURL}); err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv()
		if c := status.Code(err); c != codes.PermissionDenied && c != codes.InvalidArgument {
			t.Errorf("node %q: stream ended with %v; want PermissionDenied or InvalidArgument", node, err)
		}
	}
	e.service("web", "241.0.0.1", nil, grpcPort("grpc"))
	if good.settle() == 0 {
		t.Error("the good stream got nothing after the refusals")
	}
}

// FuzzParseNodeID: any node id parses or is refused with a message; a
// parse's splits rebuild the id.
func FuzzParseNodeID(f *testing.F) {
	for _, s := range []string{"default.web-1", "a.b.c", "", ".", "a.", ".b", "A.b", strings.Repeat("a.", 300), "mesh.name-with.dots.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ps, err := ParseNodeID(id)
		if err != nil {
			if err.Error() == "" || len(ps) != 0 {
				t.Fatalf("ParseNodeID(%q) = %v, %q", id, ps, err)
			}
			return
		}
		for _, p := range ps {
			if p.Mesh+"."+p.Name != id || !isName(p.Mesh) || !isName(p.Name) {
				t.Fatalf("ParseNodeID(%q) gave %v", id, p)
			}
		}
	})
}

// FuzzAuthenticator_Check: any node id, metadata token and header is
// accepted only as an existing Dataplane the token (or loopback) allows.
func FuzzAuthenticator_Check(f *testing.F) {
	k := testKeys(f)
	good := sign(f, k, token.Claims{Subject: "web-1", Role: token.RoleDataplane, Meshes: []string{"default"}})
	f.Add("default.web-1", good, "", true)
	f.Add("default.web-1", "", "Bearer "+good, false)
	f.Add("default.web-1", "", "", true)
	f.Add("default.web-2", good, "", false)
	f.Add("a.b", "x.y.z", "Bearer", false)
	a := &Authenticator{Keys: k, LoopbackTokenless: true, Exists: func(p Proxy) bool { return p == Proxy{Mesh: "default", Name: "web-1"} }}
	f.Fuzz(func(t *testing.T, id, metaToken, header string, loopback bool) {
		from := "192.0.2.7"
		if loopback {
			from = "127.0.0.1"
		}
		var md metadata.MD
		if header != "" {
			md = metadata.Pairs("authorization", header)
		}
		p, ref := a.Check(peerCtx(from, md), nodeWith(id, metaToken))
		if ref != nil {
			if ref.Msg == "" || ref.Reason == "" || ref.Code == codes.OK {
				t.Fatalf("refusal without a reason: %+v", ref)
			}
			return
		}
		if p != (Proxy{Mesh: "default", Name: "web-1"}) || id != "default.web-1" {
			t.Fatalf("accepted %v for node %q", p, id)
		}
	})
}
