package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/dnsserver"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
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
	names := dnsserver.NewInspector(dnsSrv, c, testTableOptions)
	usage, err := s.vipUsage(st)
	if err != nil {
		b.Fatal(err)
	}
	g := s.newGUI(st, c, names, apiserver.Options{
		DNS:    names.Listing,
		Leader: func(context.Context) (api.LeaderStatus, error) { return api.LeaderStatus{Election: "local"}, nil },
	}, nil, usage)
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
