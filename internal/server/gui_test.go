package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/dnsserver"
	"github.com/meshnames/meshnames/internal/gui"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/vips"
)

func openTestStore(tb testing.TB) store.Store {
	tb.Helper()
	st, err := sqlite.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

func TestPoolUsage_CountsTheVIPLeases(t *testing.T) {
	st := openTestStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(ip string, expires time.Time) store.Op {
		return store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: vips.LeasePrefix + ip, Value: []byte(`{}`), ExpiresAt: expires}}
	}
	if _, err := st.Apply(context.Background(),
		lease("241.0.0.1", time.Time{}), lease("241.0.0.2", time.Time{}), // in use
		lease("241.0.0.3", now.Add(time.Minute)),  // in quarantine
		lease("241.0.0.4", now.Add(-time.Minute)), // quarantine over
		lease("242.0.0.1", time.Time{}),           // in use, another pool
		lease("fd00::1", now.Add(time.Minute)),    // quarantined, IPv6 pool
		lease("10.0.0.1", time.Time{}),            // in no pool
		store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: vips.LeasePrefix + "garbage"}},
	); err != nil {
		t.Fatal(err)
	}
	pools := map[resource.Kind]vips.Prefixes{
		resource.MeshService:          {V4: netip.MustParsePrefix("241.0.0.0/24"), V6: netip.MustParsePrefix("fd00::/64")},
		resource.MeshExternalService:  {V4: netip.MustParsePrefix("242.0.0.0/8")},
		resource.MeshMultiZoneService: {V4: netip.MustParsePrefix("243.0.0.0/30")},
	}
	got, err := poolUsage(context.Background(), st, pools, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []gui.Pool{
		{Kind: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24"), Size: 254, Used: 2, Quarantined: 1},
		{Kind: resource.MeshService, Prefix: netip.MustParsePrefix("fd00::/64"), Size: 1<<64 - 2, Quarantined: 1},
		{Kind: resource.MeshExternalService, Prefix: netip.MustParsePrefix("242.0.0.0/8"), Size: 1<<24 - 2, Used: 1},
		{Kind: resource.MeshMultiZoneService, Prefix: netip.MustParsePrefix("243.0.0.0/30"), Size: 2},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("poolUsage (-want +got):\n%s", diff)
	}
	tests := []struct {
		ip   string
		want gui.VIPState
	}{
		{"241.0.0.1", gui.VIPState{Pool: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24"), Allocated: true}},
		{"241.0.0.3", gui.VIPState{Pool: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24"), QuarantinedUntil: now.Add(time.Minute)}},
		{"241.0.0.4", gui.VIPState{Pool: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24")}},
		{"241.0.0.10", gui.VIPState{Pool: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24")}}, // no lease: free; not 241.0.0.1's
		{"10.0.0.1", gui.VIPState{}},
	}
	for _, tt := range tests {
		got, err := vipState(context.Background(), st, pools, netip.MustParseAddr(tt.ip), now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("vipState(%s) (-want +got):\n%s", tt.ip, diff)
		}
	}
}

func TestPoolSize(t *testing.T) {
	for p, want := range map[string]uint64{"241.0.0.0/8": 1<<24 - 2, "10.0.0.0/30": 2, "10.0.0.0/31": 0, "10.0.0.1/32": 0, "fd00::/64": 1<<64 - 2, "fd00::/16": 1<<64 - 2, "fd00::/120": 254} {
		if got := poolSize(netip.MustParsePrefix(p)); got != want {
			t.Errorf("poolSize(%s) = %d, want %d", p, got, want)
		}
	}
}

// tableOf builds the DNS table of objs and a server answering from it.
func tableOf(objs []*resource.Object) *dnsserver.Server {
	srv := dnsserver.New(dnsserver.Options{Addr: "127.0.0.1:0", Log: slog.New(slog.DiscardHandler)})
	srv.SetTable(dnsserver.Build(objs, testTableOptions))
	return srv
}

var testTableOptions = dnsserver.TableOptions{TTL: 10, Domains: []string{"mesh.local", "mesh"}}

func meshService(mesh, name string, vip string, port string, addrs ...resource.Address) *resource.Object {
	spec := &resource.MeshServiceSpec{Ports: []resource.Port{{Name: port, Port: 80, AppProtocol: resource.ProtocolHTTP}}}
	st := &resource.ServiceStatus{Addresses: addrs}
	if vip != "" {
		st.VIPs = []resource.VIP{{IP: vip, Type: resource.VIPKuma}}
	}
	return &resource.Object{Kind: resource.MeshService, Mesh: mesh, Name: name, Spec: spec, Status: st, CreationTime: time.Unix(int64(len(name)), 0)}
}

func addr(host, status string) resource.Address {
	return resource.Address{Hostname: host, Status: status, Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "g"}}
}

func TestGUIDNSFunctions(t *testing.T) {
	objs := []*resource.Object{
		meshService("default", "web", "241.0.0.1", "http", addr("web.svc.mesh.local", resource.AddressAvailable)),
		meshService("default", "api", "241.0.0.2", "", addr("api.svc.mesh.local", resource.AddressAvailable)),
		meshService("other", "web", "241.0.0.3", "", addr("web.svc.mesh.local", resource.AddressAvailable)),
	}
	srv := tableOf(objs)
	// dnsPage: sorted by name, filtered, paged, SRV names included.
	names, total := dnsPage(srv, "default", "", 0, 10)
	var got []string
	for _, n := range names {
		got = append(got, n.Name)
	}
	if diff := cmp.Diff([]string{"_http._tcp.web.svc.mesh.local.", "api.svc.mesh.local.", "web.svc.mesh.local."}, got); diff != "" || total != 3 {
		t.Errorf("dnsPage: %d names (-want +got):\n%s", total, diff)
	}
	if names, total := dnsPage(srv, "default", "241.0.0.2", 0, 10); total != 1 || names[0].Service != "api" {
		t.Errorf("dnsPage by address: %d %+v", total, names)
	}
	if names, total := dnsPage(srv, "default", "", 1, 1); total != 3 || len(names) != 1 || names[0].Name != "api.svc.mesh.local." {
		t.Errorf("dnsPage offset 1 limit 1: %d %+v", total, names)
	}
	// The paged names are the _dns listing's, converted alike.
	full := dnsListing(srv, nil, testTableOptions, "default")
	all, _ := dnsPage(srv, "default", "", 0, 100)
	l, err := apiserver.DNSListing(cacheWithMesh(t, "default"), func(string) api.DNSListing { return full }, "default")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l.Names, all); diff != "" {
		t.Errorf("dnsPage differs from the _dns listing (-listing +page):\n%s", diff)
	}
	// lookupDNS: every mesh; lookupAddr: the reverse name's records.
	var meshes []string
	for _, m := range lookupDNS(srv, "WEB.svc.mesh.local.") {
		meshes = append(meshes, m.Mesh+"/"+m.Name.Service)
	}
	if diff := cmp.Diff([]string{"default/web", "other/web"}, meshes); diff != "" {
		t.Errorf("lookupDNS (-want +got):\n%s", diff)
	}
	if m := lookupAddr(srv, netip.MustParseAddr("241.0.0.2")); len(m) != 1 || m[0].Name.Service != "api" || m[0].Mesh != "default" {
		t.Errorf("lookupAddr: %+v", m)
	}
	// matchDNS: by name and by address.
	for _, tt := range []struct {
		word string
		want []string
	}{{"web.svc", []string{"default/web", "other/web"}}, {"241.0.0.2", []string{"default/api"}}, {"nothing", nil}} {
		var keys []string
		matchDNS(srv, tt.word, func(k resource.Key) { keys = append(keys, k.Mesh+"/"+k.Name) })
		if diff := cmp.Diff(tt.want, dedupSorted(keys)); diff != "" {
			t.Errorf("matchDNS(%q) (-want +got):\n%s", tt.word, diff)
		}
	}
}

func dedupSorted(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// cacheWithMesh returns a synced cache over a store holding mesh.
// On a global, every name of every service is listed as not answered,
// with the reason, though the statuses it holds carry the zones' VIPs and
// hostnames; its table answers none of them.
func TestGUIDNSFunctions_Global(t *testing.T) {
	st := openTestStore(t)
	ctx := context.Background()
	objs := []*resource.Object{
		{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}},
		meshService("default", "web", "241.0.0.1", "http", addr("web.svc.mesh.local", resource.AddressAvailable)),
		meshService("default", "api", "241.0.0.1", "", addr("api.svc.mesh.local", resource.AddressAvailable)),
		meshService("other", "db", "241.0.0.1", "", addr("db.svc.mesh.local", resource.AddressAvailable)),
	}
	for _, o := range objs {
		status := o.Status
		o.Status = nil
		created, err := store.Create(ctx, st, o)
		if err != nil {
			t.Fatal(err)
		}
		if status != nil {
			created.Status = status
			if _, err := store.UpdateStatus(ctx, st, created); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := runCache(t, st)
	o := testTableOptions
	o.Global = true
	b := dnsserver.NewBuilder(c, dnsserver.New(dnsserver.Options{Addr: "127.0.0.1:0", Log: slog.New(slog.DiscardHandler)}), o)
	built := make(chan *dnsserver.Table, 1)
	b.Built = func(tb *dnsserver.Table) { built <- tb }
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = b.Run(bctx) }()
	var table *dnsserver.Table
	select {
	case table = <-built:
	case <-time.After(10 * time.Second):
		t.Fatal("the global's builder published no table")
	}
	if len(table.Views) != 0 {
		t.Errorf("the global's table has views of %d meshes, want none", len(table.Views))
	}
	srv := dnsserver.New(dnsserver.Options{Addr: "127.0.0.1:0", Log: slog.New(slog.DiscardHandler)})
	srv.SetTable(table)
	l, err := apiserver.DNSListing(c, func(mesh string) api.DNSListing { return dnsListing(srv, c, o, mesh) }, "default")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range l.NotAnswered {
		if n.Reason != dnsserver.GlobalAnswersNoNames {
			t.Errorf("%s: reason %q, want the global's", n.Name, n.Reason)
		}
		got = append(got, n.Service+" "+n.Name)
	}
	want := []string{"api api.svc.mesh.local.", "web web.svc.mesh.local."}
	if diff := cmp.Diff(want, got); diff != "" || len(l.Names) != 0 {
		t.Errorf("the global's _dns listing of default: names %v, not answered (-want +got):\n%s", l.Names, diff)
	}
	one := serviceDNS(srv, c, o, resource.Key{Kind: resource.MeshService, Mesh: "other", Name: "db"})
	if len(one.Names) != 0 || len(one.NotAnswered) != 1 || one.NotAnswered[0].Name != "db.svc.mesh.local." || one.NotAnswered[0].Reason != dnsserver.GlobalAnswersNoNames {
		t.Errorf("the global's listing of other/db: %+v", one)
	}
}

func cacheWithMesh(tb testing.TB, mesh string) *cache.Cache {
	tb.Helper()
	st := openTestStore(tb)
	if _, err := store.Create(context.Background(), st, &resource.Object{Kind: resource.Mesh, Name: mesh, Spec: &resource.MeshSpec{}}); err != nil {
		tb.Fatal(err)
	}
	return runCache(tb, st)
}

func runCache(tb testing.TB, st store.Store) *cache.Cache {
	tb.Helper()
	c := cache.New(st, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if !c.WaitSynced(wctx) {
		tb.Fatal("the cache did not load")
	}
	return c
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGUIPages_100k measures the server's work for each GUI page with
// 100,000 MeshServices, wired as `serve` wires it (the DNS table built
// from them), rendering included; the network and the browser are not.
func BenchmarkGUIPages_100k(b *testing.B) {
	const n = 100_000
	st := openTestStore(b)
	ctx := context.Background()
	objs := []*resource.Object{{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}}
	for i := range n {
		addrs := []resource.Address{addr(fmt.Sprintf("svc-%d.svc.mesh.local", i), resource.AddressAvailable)}
		if i%1000 == 999 { // one in a thousand also claims a name it lost
			addrs = append(addrs, resource.Address{Hostname: "svc-0.svc.mesh.local", Status: resource.AddressNotAvailable,
				Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "alias"}, Reason: "taken by svc-0"})
		}
		o := meshService("default", fmt.Sprintf("svc-%d", i), fmt.Sprintf("241.%d.%d.%d", i>>16&255, i>>8&255, i&255+1), "http", addrs...)
		o.Labels = map[string]string{"team": fmt.Sprintf("team-%d", i%100)}
		objs = append(objs, o)
	}
	for start := 0; start < len(objs); start += 1000 {
		var creates, statuses []store.Op
		for _, o := range objs[start:min(start+1000, len(objs))] {
			c := o.Clone()
			c.Status = nil
			creates = append(creates, store.Op{Type: store.OpCreate, Object: c, DiscardObject: true})
			if o.Status != nil {
				s := o.Clone()
				s.Version = 1
				statuses = append(statuses, store.Op{Type: store.OpUpdateStatus, Object: s, DiscardObject: true})
			}
		}
		for _, ops := range [][]store.Op{creates, statuses} {
			if len(ops) == 0 {
				continue
			}
			if _, err := st.Apply(ctx, ops...); err != nil {
				b.Fatal(err)
			}
		}
	}
	c := runCache(b, st)
	dnsSrv := tableOf(objs)
	s := New(config.Default(), slog.New(slog.DiscardHandler), "bench")
	g, err := s.newGUI(st, c, dnsSrv, testTableOptions, apiserver.Options{
		DNS:    func(mesh string) api.DNSListing { return dnsListing(dnsSrv, c, testTableOptions, mesh) },
		Leader: func(context.Context) (api.LeaderStatus, error) { return api.LeaderStatus{Election: "local"}, nil },
	}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := g.Handler()
	get := func(b *testing.B, path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body.String())
		}
		return rec.Body.Len()
	}
	b.Run("first-request", func(b *testing.B) { // builds the index, as Run does at start
		get(b, "/gui/")
	})
	for _, path := range []string{
		"/gui/",
		"/gui/services",
		"/gui/services?page=1000",
		"/gui/services?q=svc-99999",
		"/gui/services?q=241.1.134.",
		"/gui/services?q=team%3Dteam-7+svc-9",
		"/gui/services?q=svc",
		"/gui/services/meshservices/default/svc-99999",
		"/gui/generators",
		"/gui/dns",
		"/gui/dns?q=svc-9999",
		"/gui/search?q=241.1.134.160",
		"/gui/search?q=svc-0.svc.mesh.local",
		"/gui/search?q=nothing",
	} {
		name := strings.TrimPrefix(path, "/gui/")
		if name == "" {
			name = "overview"
		}
		b.Run(strings.NewReplacer("/", "_", "?", "_").Replace(name), func(b *testing.B) {
			var size int
			cpu := cpuTime()
			for b.Loop() {
				size = get(b, path)
			}
			// The process's CPU time per page: on a machine shared with
			// other work, the wall time (ns/op) says more of the others.
			b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
}

// TestPoolsReader_GaugesWhileLeading checks where the pools' usage comes
// from: the VIP controller's gauges while leading, else the leases.
func TestPoolsReader_GaugesWhileLeading(t *testing.T) {
	st := openTestStore(t)
	if _, err := st.Apply(context.Background(), store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: vips.LeasePrefix + "241.0.0.1", Value: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	pools := map[resource.Kind]vips.Prefixes{
		resource.MeshService:          {V4: netip.MustParsePrefix("241.0.0.0/24")},
		resource.MeshExternalService:  {V4: netip.MustParsePrefix("242.0.0.0/24")},
		resource.MeshMultiZoneService: {V4: netip.MustParsePrefix("243.0.0.0/24")},
	}
	reg := prometheus.NewRegistry()
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "meshnames_vips_pool_addresses"}, []string{"pool", "state"})
	reg.MustRegister(gauge)
	leading := false
	r := &poolsReader{st: st, gather: reg, pools: pools, leading: func() bool { return leading }}
	used := func() []uint64 {
		p, err := r.read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, x := range p {
			out = append(out, x.Used, x.Quarantined)
		}
		return out
	}
	if got := used(); !slices.Equal(got, []uint64{1, 0, 0, 0, 0, 0}) {
		t.Errorf("not leading: %v, want the lease's 1 used", got)
	}
	leading = true
	if got := used(); !slices.Equal(got, []uint64{1, 0, 0, 0, 0, 0}) {
		t.Errorf("leading, no gauges yet: %v, want the leases' figures", got)
	}
	for _, p := range []string{"241.0.0.0/24", "242.0.0.0/24", "243.0.0.0/24"} {
		gauge.WithLabelValues(p, "size").Set(254)
		gauge.WithLabelValues(p, "used").Set(7)
		gauge.WithLabelValues(p, "quarantined").Set(3)
	}
	if got := used(); !slices.Equal(got, []uint64{7, 3, 7, 3, 7, 3}) {
		t.Errorf("leading: %v, want the gauges' 7 used and 3 quarantined", got)
	}
}
