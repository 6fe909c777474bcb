package xds

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/porttest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a store, a cache, a builder and an ADS server on loopback.
type env struct {
	t     *testing.T
	ctx   context.Context
	st    store.Store
	cache *cache.Cache
	b     *Builder
	srv   *Server
	addr  string
}

func newEnv(t *testing.T, auth *Authenticator) *env {
	t.Helper()
	return newEnvAuth(t, auth, nil)
}

// newEnvWith is newEnv with the builder adjusted by fn before it runs.
func newEnvWith(t *testing.T, fn func(*Builder)) *env {
	t.Helper()
	return newEnvAuth(t, nil, fn)
}

func newEnvAuth(t *testing.T, auth *Authenticator, fn func(*Builder)) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := cache.New(st, discard, nil)
	b := NewBuilder(c, "zone-a")
	if fn != nil {
		fn(b)
	}
	port, err := porttest.Free()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, st: st, cache: c, b: b, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	if auth == nil {
		auth = &Authenticator{LoopbackTokenless: true}
	}
	if auth.Exists == nil {
		auth.Exists = b.Knows
	}
	listening := make(chan struct{})
	e.srv = New(Options{Addr: e.addr, Builder: b, Auth: auth, Log: discard, Listening: func(string) { close(listening) }})
	done := make(chan struct{}, 3)
	go func() { _ = c.Run(ctx); done <- struct{}{} }()
	go func() { _ = b.Run(ctx); done <- struct{}{} }()
	go func() {
		if err := e.srv.Run(ctx); err != nil {
			t.Error(err)
		}
		done <- struct{}{}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		<-done
		st.Close()
	})
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("the ADS server did not listen")
	}
	e.create(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}})
	return e
}

func (e *env) create(o *resource.Object) *resource.Object {
	e.t.Helper()
	if o.Spec != nil {
		o.Spec.Default()
	}
	got, err := store.Create(e.ctx, e.st, o)
	if err != nil {
		e.t.Fatalf("create %s: %v", o.Key(), err)
	}
	e.seen(got.Revision)
	return got
}

// seen waits until the cache shows revision rev, as the REST API's writes
// do before they answer: a proxy that connects after its Dataplane's write
// returned is then never refused as unknown.
func (e *env) seen(rev int64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	if err := e.cache.WaitFor(ctx, rev); err != nil {
		e.t.Fatalf("the cache did not reach revision %d: %v", rev, err)
	}
}

// update reads k, applies fn to it and writes spec (and labels) back.
func (e *env) update(k resource.Key, fn func(*resource.Object)) {
	e.t.Helper()
	o, err := e.st.Get(e.ctx, k)
	if err != nil {
		e.t.Fatal(err)
	}
	fn(o)
	got, err := store.Update(e.ctx, e.st, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.seen(got.Revision)
}

func (e *env) updateStatus(o *resource.Object) {
	e.t.Helper()
	got, err := store.UpdateStatus(e.ctx, e.st, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.seen(got.Revision)
}

func (e *env) delete(k resource.Key) {
	e.t.Helper()
	rev, err := store.Delete(e.ctx, e.st, k, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	e.seen(rev)
}

// service creates a MeshService selecting kuma.io/service=name, with
// ports "port/targetPortName/protocol", then writes its status: the given
// hostnames Available and one VIP.
func (e *env) service(name string, vip string, hostnames []string, ports ...resource.Port) *resource.Object {
	e.t.Helper()
	o := e.create(&resource.Object{Kind: resource.MeshService, Mesh: "default", Name: name,
		Spec: &resource.MeshServiceSpec{Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{resource.TagService: name}}, Ports: ports}})
	st := &resource.ServiceStatus{}
	for i, h := range hostnames {
		st.Addresses = append(st.Addresses, resource.Address{Hostname: h, Status: resource.AddressAvailable,
			Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: fmt.Sprintf("gen-%d", i)}})
	}
	if vip != "" {
		st.VIPs = []resource.VIP{{IP: vip, Type: resource.VIPKuma}}
	}
	o.Status = st
	o, err := store.UpdateStatus(e.ctx, e.st, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

// dataplane creates a Dataplane at 127.0.0.1 whose inbounds serve the
// given service on the given ports (named "grpc").
func (e *env) dataplane(name, service string, ports ...int) {
	e.t.Helper()
	spec := &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{Address: "127.0.0.1"}}
	for _, p := range ports {
		spec.Networking.Inbound = append(spec.Networking.Inbound, resource.Inbound{Name: "grpc", Port: p, Tags: map[string]string{resource.TagService: service}})
	}
	e.create(&resource.Object{Kind: resource.Dataplane, Mesh: "default", Name: name, Spec: spec})
}

func grpcPort(name string) resource.Port {
	return resource.Port{Port: 8080, Name: "grpc", TargetPort: &resource.IntOrString{String: name, IsName: true}, AppProtocol: resource.ProtocolGRPC}
}

func protoMarshal(m any) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m.(proto.Message))
}
