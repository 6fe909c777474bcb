package dnsserver

import (
	"cmp"
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// inspectorOf returns an inspector of the table of objs (no cache: what it
// reads of one is only for a global and for Service).
func inspectorOf(objs ...*resource.Object) *Inspector {
	srv := New(Options{Addr: "127.0.0.1:0", Log: slog.New(slog.DiscardHandler)})
	srv.SetTable(Build(objs, testOpts))
	return NewInspector(srv, nil, testOpts)
}

// TestInspector checks what readers see of the table: pages of names
// (sorted, filtered, SRV names included) that agree with the listing,
// lookups of a name in every mesh and of an address, and the services
// whose names or addresses contain a word.
func TestInspector(t *testing.T) {
	in := inspectorOf(
		svc(resource.MeshService, "default", "web", 0, vips("241.0.0.1"), ports("http:80"), hosts("web.svc.mesh.local")),
		svc(resource.MeshService, "default", "api", 1, vips("241.0.0.2"), hosts("api.svc.mesh.local")),
		svc(resource.MeshService, "other", "web", 0, vips("241.0.0.3"), hosts("web.svc.mesh.local")),
	)
	names, total := in.Page("default", "", 0, 10)
	var got []string
	for _, n := range names {
		got = append(got, n.Name)
	}
	if diff := gocmp.Diff([]string{"_http._tcp.web.svc.mesh.local.", "api.svc.mesh.local.", "web.svc.mesh.local."}, got); diff != "" || total != 3 {
		t.Errorf("Page: %d names (-want +got):\n%s", total, diff)
	}
	if names, total := in.Page("default", "241.0.0.2", 0, 10); total != 1 || names[0].Service != "api" {
		t.Errorf("Page by address: %d %+v", total, names)
	}
	if names, total := in.Page("default", "", 1, 1); total != 3 || len(names) != 1 || names[0].Name != "api.svc.mesh.local." {
		t.Errorf("Page offset 1 limit 1: %d %+v", total, names)
	}
	// The paged names are the listing's, converted alike.
	l := in.Listing("default")
	slices.SortFunc(l.Names, func(a, b api.DNSName) int { return cmp.Compare(a.Name, b.Name) })
	all, _ := in.Page("default", "", 0, 100)
	if diff := gocmp.Diff(l.Names, all); diff != "" {
		t.Errorf("Page differs from Listing (-listing +page):\n%s", diff)
	}
	var meshes []string
	for _, m := range in.Lookup("WEB.svc.mesh.local.") {
		meshes = append(meshes, m.Mesh+"/"+m.Name.Service)
	}
	if diff := gocmp.Diff([]string{"default/web", "other/web"}, meshes); diff != "" {
		t.Errorf("Lookup (-want +got):\n%s", diff)
	}
	if m := in.LookupAddr(netip.MustParseAddr("241.0.0.2")); len(m) != 1 || m[0].Name.Service != "api" || m[0].Mesh != "default" {
		t.Errorf("LookupAddr: %+v", m)
	}
	for _, tt := range []struct {
		word string
		want []string
	}{{"web.svc", []string{"default/web", "other/web"}}, {"241.0.0.2", []string{"default/api"}}, {"nothing", nil}} {
		var keys []string
		in.Match(tt.word, func(k resource.Key) { keys = append(keys, k.Mesh+"/"+k.Name) })
		slices.Sort(keys)
		if diff := gocmp.Diff(tt.want, slices.Compact(keys)); diff != "" {
			t.Errorf("Match(%q) (-want +got):\n%s", tt.word, diff)
		}
	}
}

// TestInspector_Global: on a global, every name of every service is listed
// as not answered, with the reason, though the statuses it holds carry the
// zones' VIPs and hostnames; its table answers none of them.
func TestInspector_Global(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := store.Create(ctx, st, &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*resource.Object{
		svc(resource.MeshService, "default", "web", 0, vips("241.0.0.1"), ports("http:80"), hosts("web.svc.mesh.local")),
		svc(resource.MeshService, "default", "api", 0, vips("241.0.0.1"), hosts("api.svc.mesh.local")),
		svc(resource.MeshService, "other", "db", 0, vips("241.0.0.1"), hosts("db.svc.mesh.local")),
	} {
		status := o.Status
		o.Status = nil
		created, err := store.Create(ctx, st, o)
		if err != nil {
			t.Fatal(err)
		}
		created.Status = status
		if _, err := store.UpdateStatus(ctx, st, created); err != nil {
			t.Fatal(err)
		}
	}
	c := cache.New(st, slog.New(slog.DiscardHandler), nil)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.Run(cctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !c.WaitSynced(wctx) {
		t.Fatal("the cache did not load")
	}
	o := testOpts
	o.Global = true
	srv := New(Options{Addr: "127.0.0.1:0", Log: slog.New(slog.DiscardHandler)})
	b := NewBuilder(c, srv, o)
	built := make(chan *Table, 1)
	b.Built = func(tb *Table) { built <- tb }
	go func() { _ = b.Run(cctx) }()
	select {
	case table := <-built:
		if len(table.Views) != 0 {
			t.Errorf("the global's table has views of %d meshes, want none", len(table.Views))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the global's builder published no table")
	}
	in := NewInspector(srv, c, o)
	l := in.Listing("default")
	var got []string
	for _, n := range l.NotAnswered {
		if n.Reason != GlobalAnswersNoNames {
			t.Errorf("%s: reason %q, want the global's", n.Name, n.Reason)
		}
		got = append(got, n.Service+" "+n.Name)
	}
	slices.Sort(got)
	want := []string{"api api.svc.mesh.local.", "web web.svc.mesh.local."}
	if diff := gocmp.Diff(want, got); diff != "" || len(l.Names) != 0 {
		t.Errorf("the global's listing of default: names %v, not answered (-want +got):\n%s", l.Names, diff)
	}
	one := in.Service(resource.Key{Kind: resource.MeshService, Mesh: "other", Name: "db"})
	if len(one.Names) != 0 || len(one.NotAnswered) != 1 || one.NotAnswered[0].Name != "db.svc.mesh.local." || one.NotAnswered[0].Reason != GlobalAnswersNoNames {
		t.Errorf("the global's listing of other/db: %+v", one)
	}
}
