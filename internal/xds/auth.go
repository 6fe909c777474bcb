package xds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/token"
)

// Proxy names the resource a proxy connects as: a Dataplane of a mesh,
// with no mesh a ZoneIngress of this zone, or in env kubernetes a Pod
// (Name <pod>.<namespace>, Mesh the Pod's mesh).
type Proxy struct {
	Mesh, Name string
	// Pod: the proxy is the Pod Name, which has no Dataplane.
	Pod bool
}

func (p Proxy) String() string {
	switch {
	case p.Ingress():
		return "zoneingress/" + p.Name
	case p.Pod:
		return p.Mesh + "/pod/" + p.Name
	}
	return p.Mesh + "/" + p.Name
}

// Ingress reports whether the proxy is a ZoneIngress.
func (p Proxy) Ingress() bool { return p.Mesh == "" }

// Key is the proxy's Dataplane (or ZoneIngress) key.
func (p Proxy) Key() resource.Key {
	if p.Ingress() {
		return resource.Key{Kind: resource.ZoneIngress, Name: p.Name}
	}
	return resource.Key{Kind: resource.Dataplane, Mesh: p.Mesh, Name: p.Name}
}

// isIngressNode reports whether node says it is a ZoneIngress proxy: node
// metadata proxyType (or Kuma's dataplane.proxyType) "ingress".
func isIngressNode(node *corev3.Node) bool {
	f := node.GetMetadata().GetFields()
	for _, k := range []string{"proxyType", "dataplane.proxyType"} {
		if v, ok := f[k]; ok && v.GetStringValue() == "ingress" {
			return true
		}
	}
	return false
}

// MaxNodeIDBytes bounds a node id: a mesh name, a dot and a Dataplane
// name, each at most 253 bytes.
const MaxNodeIDBytes = 2*253 + 1

// ParseNodeID splits a node id <mesh>.<name> (Kuma's convention) into
// every split it allows, first dot first: mesh names may hold dots, so
// "a.b.c" is mesh a, Dataplane b.c, or mesh a.b, Dataplane c. The caller
// takes the first split whose Dataplane exists.
func ParseNodeID(id string) ([]Proxy, error) {
	switch {
	case id == "":
		return nil, errors.New("node.id is empty: it must be <mesh>.<dataplane name>")
	case len(id) > MaxNodeIDBytes:
		return nil, fmt.Errorf("node.id is %d bytes: at most %d (<mesh>.<dataplane name>)", len(id), MaxNodeIDBytes)
	}
	var out []Proxy
	for i := 0; i < len(id); i++ {
		if id[i] != '.' {
			continue
		}
		mesh, name := id[:i], id[i+1:]
		if isName(mesh) && isName(name) {
			out = append(out, Proxy{Mesh: mesh, Name: name})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("node.id %q is not <mesh>.<dataplane name> (DNS-1123 subdomains)", id)
	}
	return out, nil
}

// isName reports whether s is a DNS-1123 subdomain, as mesh and
// Dataplane names are.
func isName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Authenticator decides whether a stream may serve the proxy it names.
type Authenticator struct {
	// Keys verifies dataplane tokens.
	Keys *token.Keys
	// LoopbackTokenless accepts a stream without a token from a loopback
	// address, as the REST API accepts requests (api.auth.loopbackAdmin).
	LoopbackTokenless bool
	// Exists reports whether a Dataplane exists.
	Exists func(Proxy) bool
	// Pods, when set (env kubernetes), lets a Pod's proxy connect as the
	// Pod (kube.go): node id <pod>.<namespace>, and a service-account
	// token of the Pod's service account or a dataplane token issued for
	// <pod>.<namespace> in the Pod's mesh.
	Pods PodIdentity
	// MeshExists reports whether a mesh exists: a Pod's must (with Pods).
	MeshExists func(string) bool
	Now        func() time.Time
}

// Refusal is why a stream was refused: its gRPC code and a reason label
// for metrics.
type Refusal struct {
	Code   codes.Code
	Reason string
	Msg    string
}

func (r *Refusal) Error() string { return r.Msg }

// GRPC returns the refusal as a gRPC status error.
func (r *Refusal) GRPC() error { return status.Error(r.Code, r.Msg) }

func refuse(code codes.Code, reason, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Check authenticates a stream of ctx whose node is node: it returns the
// proxy, or why it is refused. The token comes from the authorization
// header (Bearer) or, for clients that cannot set headers (grpc-go's
// bootstrap), the node metadata key "token".
func (a *Authenticator) Check(ctx context.Context, node *corev3.Node) (Proxy, *Refusal) {
	if node == nil {
		return Proxy{}, refuse(codes.InvalidArgument, "no_node", "the first request of a stream must carry node (id <mesh>.<dataplane name>)")
	}
	if isIngressNode(node) {
		return a.checkIngress(ctx, node)
	}
	candidates, err := ParseNodeID(node.GetId())
	if err != nil {
		return Proxy{}, refuse(codes.InvalidArgument, "bad_node_id", "%s", err.Error())
	}
	raw, ref := tokenOf(ctx, node)
	if ref != nil {
		return Proxy{}, ref
	}
	if raw != "" && a.Pods != nil && !meshnamesToken(raw) {
		return a.checkPod(ctx, node.GetId(), raw, "") // a service-account token
	}
	var p Proxy
	found := false
	if raw == "" {
		if !a.LoopbackTokenless || !fromLoopback(ctx) {
			return Proxy{}, refuse(codes.Unauthenticated, "missing",
				"this stream needs a dataplane token: send authorization: Bearer <token> or node metadata \"token\" (meshnames token dataplane --mesh M --name N)")
		}
		for _, c := range candidates {
			if a.Exists(c) {
				p, found = c, true
				break
			}
		}
		if !found && a.Pods != nil {
			p, ref := a.checkPod(ctx, node.GetId(), "", "")
			if ref != nil && ref.Reason == "unknown_pod" {
				id := node.GetId()
				i := strings.LastIndexByte(id, '.')
				ref.Msg = fmt.Sprintf("node %q names neither a Dataplane (%s) nor a Pod (%s/%s) that exists", id, candidates[0], id[i+1:], id[:i])
			}
			return p, ref
		}
	} else {
		now := time.Now
		if a.Now != nil {
			now = a.Now
		}
		c, err := a.Keys.Verify(raw, now())
		if err != nil {
			return Proxy{}, refuse(codes.Unauthenticated, token.Reason(err), "the dataplane token is not accepted: %s", err.Error())
		}
		if c.Role != token.RoleDataplane || len(c.Meshes) != 1 {
			return Proxy{}, refuse(codes.PermissionDenied, "role", "a %s token does not identify a proxy: issue one with meshnames token dataplane", c.Role)
		}
		p = Proxy{Mesh: c.Meshes[0], Name: c.Subject}
		if a.Pods != nil && node.GetId() == c.Subject {
			return a.checkPod(ctx, node.GetId(), "", p.Mesh) // a dataplane token for <pod>.<namespace>
		}
		if node.GetId() != p.Mesh+"."+p.Name {
			return Proxy{}, refuse(codes.PermissionDenied, "other_dataplane", "the token is for dataplane %s (node id %s.%s), not for node %q", p, p.Mesh, p.Name, node.GetId())
		}
		found = a.Exists(p)
	}
	if !found {
		if p == (Proxy{}) {
			p = candidates[0]
		}
		return Proxy{}, refuse(codes.PermissionDenied, "unknown_dataplane",
			"no Dataplane %s exists for node %q: create it (meshnames apply) before its proxy connects", p, node.GetId())
	}
	return p, nil
}

// checkIngress authenticates a ZoneIngress proxy: its node id is the
// ZoneIngress's name, of this zone, and its token an ingress token for it.
func (a *Authenticator) checkIngress(ctx context.Context, node *corev3.Node) (Proxy, *Refusal) {
	p := Proxy{Name: node.GetId()}
	if !isName(p.Name) {
		return Proxy{}, refuse(codes.InvalidArgument, "bad_node_id", "node.id %q of a ZoneIngress proxy must be the ZoneIngress's name (a DNS-1123 subdomain)", p.Name)
	}
	raw, ref := tokenOf(ctx, node)
	if ref != nil {
		return Proxy{}, ref
	}
	if raw == "" {
		if !a.LoopbackTokenless || !fromLoopback(ctx) {
			return Proxy{}, refuse(codes.Unauthenticated, "missing",
				"this stream needs an ingress token: send authorization: Bearer <token> or node metadata \"token\" (meshnames token ingress --name N)")
		}
	} else {
		now := time.Now
		if a.Now != nil {
			now = a.Now
		}
		c, err := a.Keys.Verify(raw, now())
		if err != nil {
			return Proxy{}, refuse(codes.Unauthenticated, token.Reason(err), "the ingress token is not accepted: %s", err.Error())
		}
		if c.Role != token.RoleIngress {
			return Proxy{}, refuse(codes.PermissionDenied, "role", "a %s token does not identify a ZoneIngress: issue one with meshnames token ingress", c.Role)
		}
		if c.Subject != p.Name {
			return Proxy{}, refuse(codes.PermissionDenied, "other_dataplane", "the token is for ZoneIngress %s, not for node %q", c.Subject, p.Name)
		}
	}
	if !a.Exists(p) {
		return Proxy{}, refuse(codes.PermissionDenied, "unknown_dataplane",
			"no ZoneIngress %s of this zone exists for node %q: create it (meshnames apply) before its proxy connects", p.Name, p.Name)
	}
	return p, nil
}

// tokenOf returns the stream's token: the authorization header, else the
// node metadata key token; "" when there is none.
func tokenOf(ctx context.Context, node *corev3.Node) (string, *Refusal) {
	md, _ := metadata.FromIncomingContext(ctx)
	if h := md.Get("authorization"); len(h) > 0 {
		scheme, raw, ok := strings.Cut(h[0], " ")
		raw = strings.TrimSpace(raw)
		if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
			return "", refuse(codes.Unauthenticated, "malformed_header", `the authorization header must be "Bearer <token>"`)
		}
		return raw, nil
	}
	if f, ok := node.GetMetadata().GetFields()["token"]; ok {
		raw := strings.TrimSpace(f.GetStringValue())
		if raw == "" {
			return "", refuse(codes.Unauthenticated, "malformed_metadata", "node metadata token must be a non-empty string")
		}
		return raw, nil
	}
	return "", nil
}

func fromLoopback(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return false
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
