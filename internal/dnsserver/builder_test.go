package dnsserver

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// TestBuilder follows a real cache over a real embedded store: a service
// whose status gets a hostname and a VIP becomes resolvable, a Dataplane
// at the query's source switches its view, and deleting the service makes
// the name NXDOMAIN.
func TestBuilder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// A service in the store before the builder starts: the initial table.
	pre, err := store.Create(ctx, st, svc(resource.MeshService, "default", "pre", 0))
	if err != nil {
		t.Fatal(err)
	}
	pre.Status = &resource.ServiceStatus{
		Addresses: []resource.Address{{Hostname: "pre.svc.mesh.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "local"}}},
		VIPs:      []resource.VIP{{IP: "241.0.0.99", Type: resource.VIPKuma}},
	}
	if _, err := store.UpdateStatus(ctx, st, pre); err != nil {
		t.Fatal(err)
	}
	c := cache.New(st, discard, nil)
	s, addr := startServer(t, Options{DefaultMesh: "default"}, nil)
	b := NewBuilder(c, s, testOpts)
	wg := make(chan struct{}, 2)
	go func() { _ = c.Run(ctx); wg <- struct{}{} }()
	go func() { _ = b.Run(ctx); wg <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-wg; <-wg })

	// eventually polls a query until the reply is as wanted (bounded).
	eventually := func(what, qname string, want reply) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		var got reply
		for {
			got = summarize(exchange(t, "udp", addr, question(qname, dns.TypeA)))
			if cmp.Equal(want, got) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: reply (-want +got):\n%s", what, cmp.Diff(want, got))
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	nx := reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMeshLocal}}
	eventually("initial table", "pre.svc.mesh.local.", reply{Rcode: "NOERROR", AA: true, Answer: []string{"pre.svc.mesh.local. 10 IN A 241.0.0.99"}})
	eventually("unknown name", "web.svc.mesh.local.", nx)

	obj, err := store.Create(ctx, st, svc(resource.MeshService, "default", "web", 0, ports("http:80"), tags("web_default_svc_80")))
	if err != nil {
		t.Fatal(err)
	}
	// Without status the service has no VIP: nothing answers.
	if _, err := store.Create(ctx, st, svc(resource.MeshService, "default", "other", 0)); err != nil {
		t.Fatal(err)
	}
	eventually("before status", "web.svc.mesh.local.", nx)

	obj.Status = &resource.ServiceStatus{
		Addresses: []resource.Address{
			{Hostname: "web.svc.mesh.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "local"}},
			{Hostname: "web.default.svc.80.mesh", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginServiceTagAlias, Name: "web_default_svc_80"}},
		},
		VIPs: []resource.VIP{{IP: "241.0.0.1", Type: resource.VIPKuma}},
	}
	obj, err = store.UpdateStatus(ctx, st, obj)
	if err != nil {
		t.Fatal(err)
	}
	eventually("after status", "web.svc.mesh.local.", reply{Rcode: "NOERROR", AA: true, Answer: []string{"web.svc.mesh.local. 10 IN A 241.0.0.1"}})
	eventually("service tag", "web.default.svc.80.mesh.", reply{Rcode: "NOERROR", AA: true, Answer: []string{"web.default.svc.80.mesh. 10 IN A 241.0.0.1"}})

	// The same name in mesh b, and a Dataplane of b at our address.
	objB, err := store.Create(ctx, st, svc(resource.MeshService, "b", "web", 0))
	if err != nil {
		t.Fatal(err)
	}
	objB.Status = &resource.ServiceStatus{
		Addresses: []resource.Address{{Hostname: "web.svc.mesh.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "local"}}},
		VIPs:      []resource.VIP{{IP: "241.0.0.7", Type: resource.VIPKuma}},
	}
	if _, err := store.UpdateStatus(ctx, st, objB); err != nil {
		t.Fatal(err)
	}
	dp, err := store.Create(ctx, st, dataplane("b", "dp", 0, "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	eventually("dataplane of b", "web.svc.mesh.local.", reply{Rcode: "NOERROR", AA: true, Answer: []string{"web.svc.mesh.local. 10 IN A 241.0.0.7"}})
	if _, err := store.Delete(ctx, st, dp.Key(), 0); err != nil {
		t.Fatal(err)
	}
	eventually("dataplane deleted", "web.svc.mesh.local.", reply{Rcode: "NOERROR", AA: true, Answer: []string{"web.svc.mesh.local. 10 IN A 241.0.0.1"}})

	// A status change that moves the VIP.
	obj.Status.(*resource.ServiceStatus).VIPs = []resource.VIP{{IP: "241.0.0.2", Type: resource.VIPKuma}}
	if _, err = store.UpdateStatus(ctx, st, obj); err != nil {
		t.Fatal(err)
	}
	eventually("VIP changed", "web.svc.mesh.local.", reply{Rcode: "NOERROR", AA: true, Answer: []string{"web.svc.mesh.local. 10 IN A 241.0.0.2"}})

	if _, err := store.Delete(ctx, st, obj.Key(), 0); err != nil {
		t.Fatal(err)
	}
	eventually("after delete", "web.svc.mesh.local.", nx)
	eventually("tag after delete", "web_default_svc_80.mesh.", reply{Rcode: "NXDOMAIN", AA: true, Ns: []string{soaMesh}})
	eventually("pre still there", "pre.svc.mesh.local.", reply{Rcode: "NOERROR", AA: true, Answer: []string{"pre.svc.mesh.local. 10 IN A 241.0.0.99"}})
	// The last services of the mesh go: so does its view.
	for _, name := range []string{"other", "pre"} {
		if _, err := store.Delete(ctx, st, resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name}, 0); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Table().Views["default"] != nil {
		if time.Now().After(deadline) {
			t.Fatal("the view of default is still there after its last service went")
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// captureWriter keeps what ServeDNS writes.
type captureWriter struct {
	packWriter
	out []byte
}

func (w *captureWriter) Write(b []byte) (int, error) {
	w.out = append(w.out[:0], b...)
	return len(b), nil
}
