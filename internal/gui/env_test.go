package gui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// created stamps every resource of the unit tests.
var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// unit is a GUI over a real embedded store and cache, without
// controllers: the tests write status themselves.
type unit struct {
	t     *testing.T
	st    store.Store
	c     *cache.Cache
	srv   *Server
	clock *fakeClock
}

type fakeClock struct{ now time.Time }

func (f *fakeClock) Now() time.Time { return f.now }

func newUnit(t testing.TB, objs []*resource.Object) *unit {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.WithClock(func() time.Time { return created }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := cache.New(st, log, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	u := &unit{st: st, c: c, clock: &fakeClock{now: created.Add(time.Hour)}}
	if tt, ok := t.(*testing.T); ok {
		u.t = tt
	}
	u.write(t, objs...)
	u.srv = New(Options{
		Cache: c, Store: st, Mode: "standalone", Zone: "default", Version: "test", Log: log, Now: u.clock.Now,
		Hostnames: func(k resource.Key) (api.HostnamesReport, error) { return apiserver.HostnamesReport(c, "default", k) },
		Leader: func(context.Context) (api.LeaderStatus, error) {
			return api.LeaderStatus{Election: "local", Holder: "one", Self: "one", Leading: true}, nil
		},
		Pools: func(context.Context) ([]Pool, error) {
			return []Pool{
				{Kind: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24"), Size: 254, Used: 100, Quarantined: 27},
				{Kind: resource.MeshExternalService, Prefix: netip.MustParsePrefix("242.0.0.0/8"), Size: 1<<24 - 2},
			}, nil
		},
		VIP: func(_ context.Context, ip netip.Addr) (VIPState, error) {
			return VIPState{Pool: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24"), QuarantinedUntil: created.Add(2 * time.Hour)}, nil
		},
	})
	return u
}

// write creates or replaces objs, spec and status, and waits until the
// cache reflects them.
func (u *unit) write(t testing.TB, objs ...*resource.Object) {
	t.Helper()
	ctx := context.Background()
	var rev int64
	for _, o := range objs {
		status := o.Status
		o.Status = nil
		cur, err := u.st.Get(ctx, o.Key())
		if err == nil {
			o.Version = cur.Version
			cur, err = store.Update(ctx, u.st, o)
		} else {
			cur, err = store.Create(ctx, u.st, o)
		}
		if err != nil {
			t.Fatalf("write %s: %v", o.Key(), err)
		}
		rev = cur.Revision
		if status != nil {
			cur.Status = status
			cur, err = store.UpdateStatus(ctx, u.st, cur)
			if err != nil {
				t.Fatalf("status of %s: %v", o.Key(), err)
			}
			rev = cur.Revision
		}
	}
	u.waitFor(t, rev)
}

func (u *unit) delete(t testing.TB, k resource.Key) {
	t.Helper()
	rev, err := store.Delete(context.Background(), u.st, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	u.waitFor(t, rev)
}

func (u *unit) waitFor(t testing.TB, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !u.c.WaitSynced(ctx) || u.c.WaitFor(ctx, rev) != nil {
		t.Fatalf("the cache did not reach revision %d", rev)
	}
}

func (u *unit) get(t testing.TB, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	u.srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// decodeObjects reads a JSON array of documents, status included.
func decodeObjects(t testing.TB, data []byte) []*resource.Object {
	t.Helper()
	var objs []*resource.Object
	if err := json.Unmarshal(data, &objs); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Spec == nil {
			o.Spec = resource.MustLookup(o.Kind).NewSpec()
		}
		o.Spec.Default()
	}
	return objs
}

// svc is a MeshService with the addresses and VIPs given.
func svc(mesh, name string, labels map[string]string, vips []string, addrs ...resource.Address) *resource.Object {
	st := &resource.ServiceStatus{Addresses: addrs}
	for _, ip := range vips {
		st.VIPs = append(st.VIPs, resource.VIP{IP: ip, Type: resource.VIPKuma})
	}
	return &resource.Object{Kind: resource.MeshService, Mesh: mesh, Name: name, Labels: labels,
		Spec: &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 80, AppProtocol: resource.ProtocolHTTP}}}, Status: st}
}

func held(host, gen string) resource.Address {
	return resource.Address{Hostname: host, Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: gen}}
}

func lost(host, gen, reason string) resource.Address {
	return resource.Address{Hostname: host, Status: resource.AddressNotAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: gen}, Reason: reason}
}

func mesh(name string) *resource.Object {
	return &resource.Object{Kind: resource.Mesh, Name: name, Spec: &resource.MeshSpec{}}
}
