package gui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/dnsserver"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// created stamps every resource of the unit tests.
var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// unit is a GUI over a real embedded store and cache, without
// controllers: the tests write status themselves.
type unit struct {
	st  store.Store
	c   *cache.Cache
	srv *Server
}

func newUnit(t testing.TB, objs []*resource.Object) *unit {
	t.Helper()
	return newUnitWith(t, objs, nil)
}

// unitNow is the unit's clock for the "ago" figures: ten minutes after
// its resources were created.
var unitNow = created.Add(10 * time.Minute)

// newUnitWith is newUnit with its Options changed by tune before the GUI
// is built.
func newUnitWith(t testing.TB, objs []*resource.Object, tune func(*Options)) *unit {
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
	u := &unit{st: st, c: c}
	u.write(t, objs...)
	o := Options{
		Cache: c, Store: st, Mode: "standalone", Zone: "default", Version: "test", Log: log, Now: func() time.Time { return unitNow },
		DNS: func(mesh string) (api.DNSListing, error) {
			return apiserver.DNSListing(c, u.dnsListing, mesh)
		},
		DNSNames: func(mesh, q string, offset, limit int) ([]api.DNSName, int) {
			names := u.dnsListing(mesh).Names
			names = slices.DeleteFunc(names, func(n api.DNSName) bool { return !strings.Contains(n.Name, q) })
			slices.SortFunc(names, func(a, b api.DNSName) int { return strings.Compare(a.Name, b.Name) })
			return names[min(offset, len(names)):min(offset+limit, len(names))], len(names)
		},
		History: func(ctx context.Context, vip, hostname string) (api.HistoryReport, error) {
			return apiserver.HistoryReport(ctx, st, history.Query{VIP: vip, Hostname: hostname}, func(string) bool { return true })
		},
		Lookup:     u.lookup,
		LookupAddr: u.lookupAddr,
		MatchDNS:   u.matchDNS,
		Hostnames: func(k resource.Key) (api.HostnamesReport, error) {
			return apiserver.HostnamesReport(c, resource.ModeStandalone, "default", k)
		},
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
	}
	if tune != nil {
		tune(&o)
	}
	u.srv = New(o)
	return u
}

// table builds the DNS table of what the cache holds, as the DNS server
// would.
func (u *unit) table() *dnsserver.Table {
	var objs []*resource.Object
	for _, k := range append(slices.Clone(serviceKinds), resource.Dataplane) {
		objs = append(objs, func() []*resource.Object { o, _ := u.c.List(cache.Query{Kind: k}); return o }()...)
	}
	return dnsserver.Build(objs, dnsserver.TableOptions{TTL: 10, Domains: []string{"mesh.local", "mesh"}})
}

func testDNSName(mesh string, e dnsserver.Entry) DNSMatch {
	n := api.DNSName{Name: e.Name, Kind: e.Service.Kind, Service: e.Service.Name, Source: e.Source, Types: []string{"A"}}
	for _, ip := range e.A {
		n.A = append(n.A, ip.String())
	}
	return DNSMatch{Mesh: mesh, Name: n}
}

// dnsListing is the table's part of the _dns listing.
func (u *unit) dnsListing(mesh string) api.DNSListing {
	l := api.DNSListing{Mesh: mesh}
	if v := u.table().Views[mesh]; v != nil {
		for e := range v.Entries() {
			l.Names = append(l.Names, testDNSName(mesh, *e).Name)
		}
		for _, r := range v.Rejections() {
			l.NotAnswered = append(l.NotAnswered, api.DNSNotAnswer{Name: r.Name, Kind: r.Service.Kind, Service: r.Service.Name, Source: r.Source, Reason: r.Reason})
		}
	}
	return l
}

func (u *unit) lookup(name string) []DNSMatch {
	var out []DNSMatch
	for mesh, v := range u.table().Views {
		if e, ok := v.Lookup(name); ok {
			out = append(out, testDNSName(mesh, e))
		}
	}
	return out
}

func (u *unit) lookupAddr(ip netip.Addr) []DNSMatch {
	var out []DNSMatch
	rev, _ := dns.ReverseAddr(ip.String())
	for mesh, v := range u.table().Views {
		if name, ok := v.PTR(rev); ok {
			e, _ := v.Lookup(name)
			out = append(out, testDNSName(mesh, e))
		}
	}
	return out
}

func (u *unit) matchDNS(word string, fn func(resource.Key)) {
	for _, v := range u.table().Views {
		for e := range v.Entries() {
			if strings.Contains(e.Name, word) || slices.ContainsFunc(e.A, func(ip netip.Addr) bool { return strings.Contains(ip.String(), word) }) {
				fn(e.Service)
			}
		}
	}
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
