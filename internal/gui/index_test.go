package gui

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

func key(mesh, name string) resource.Key {
	return resource.Key{Kind: resource.MeshService, Mesh: mesh, Name: name}
}

func TestParseQuery(t *testing.T) {
	tests := []struct {
		q      string
		labels map[string]string
		words  []string
	}{
		{"", nil, nil},
		{"  ", nil, nil},
		{"Redis", nil, []string{"redis"}},
		{"team=storage", map[string]string{"team": "storage"}, nil},
		{"team=storage redis 241.0.0", map[string]string{"team": "storage"}, []string{"redis", "241.0.0"}},
		{"kuma.io/zone=east k=", map[string]string{"kuma.io/zone": "east", "k": ""}, nil},
		{"=value", nil, []string{"=value"}},
		{"a=b=c", map[string]string{"a": "b=c"}, nil},
	}
	for _, tt := range tests {
		q := parseQuery(tt.q)
		if diff := cmp.Diff(tt.labels, q.labels); diff != "" {
			t.Errorf("parseQuery(%q) labels (-want +got):\n%s", tt.q, diff)
		}
		if diff := cmp.Diff(tt.words, q.words); diff != "" {
			t.Errorf("parseQuery(%q) words (-want +got):\n%s", tt.q, diff)
		}
		if q.empty() != (tt.labels == nil && tt.words == nil) {
			t.Errorf("parseQuery(%q).empty() = %v", tt.q, q.empty())
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "redis", "team=storage redis", "=x", "a=b=c", "241.0.0.1 ", "\tk=v\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := parseQuery(s)
		for k := range q.labels {
			if k == "" || strings.ContainsAny(k, " \t\n") {
				t.Fatalf("parseQuery(%q): label key %q", s, k)
			}
		}
		for _, w := range q.words {
			if w == "" || w != strings.ToLower(w) || len(strings.Fields(w)) != 1 {
				t.Fatalf("parseQuery(%q): word %q", s, w)
			}
		}
		// Every term comes from one whitespace-separated field.
		if n := len(q.labels) + len(q.words); n > len(strings.Fields(s)) {
			t.Fatalf("parseQuery(%q): %d terms from %d fields", s, n, len(strings.Fields(s)))
		}
	})
}

// TestIndex_FollowsTheCache checks that searches see creations, status
// changes and deletions, and report a revision that covers them.
func TestIndex_FollowsTheCache(t *testing.T) {
	u := newUnit(t, []*resource.Object{
		mesh("default"),
		svc("default", "redis", map[string]string{"team": "storage"}, []string{"241.0.0.1"}, held("redis.svc.mesh.local", "local")),
		svc("default", "web", nil, []string{"241.0.0.2"}, held("web.svc.mesh.local", "local"), lost("redis.svc.mesh.local", "alias", "taken by redis")),
	})
	// search answers once the index has caught up with the cache's
	// revision: the cache tells its subscribers a change just after it
	// applies it, so a search in between reflects the revision before.
	search := func(q string) []resource.Key {
		want := u.c.Revision()
		deadline := time.Now().Add(10 * time.Second)
		for {
			keys, total, rev := u.srv.ix.search(serviceKinds, "", parseQuery(q), u.matchDNS, 0, 10)
			if total != len(keys) {
				t.Fatalf("search %q: total %d for %d keys", q, total, len(keys))
			}
			if rev > want {
				t.Fatalf("search %q: revision %d, past the cache's %d", q, rev, want)
			}
			if rev == want {
				return keys
			}
			if time.Now().After(deadline) {
				t.Fatalf("search %q: revision %d, the cache is at %d after 10s", q, rev, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	tests := []struct {
		q    string
		want []resource.Key
	}{
		{"redis", []resource.Key{key("default", "redis"), key("default", "web")}}, // web claims redis.svc.mesh.local
		{"web.svc", []resource.Key{key("default", "web")}},
		{"241.0.0.2", []resource.Key{key("default", "web")}},
		{"241.0.0", []resource.Key{key("default", "redis"), key("default", "web")}},
		{"team=storage", []resource.Key{key("default", "redis")}},
		{"team=storage web", nil},
		{"nothing", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, search(tt.q)); diff != "" {
			t.Errorf("search %q (-want +got):\n%s", tt.q, diff)
		}
	}
	// A status change, a new service and a deletion are seen by the next
	// search.
	u.write(t, svc("default", "web", nil, []string{"241.0.0.2"}, held("www.svc.mesh.local", "local")),
		svc("default", "api", nil, []string{"241.0.0.3"}, held("api.svc.mesh.local", "local")))
	u.delete(t, key("default", "redis"))
	if diff := cmp.Diff([]resource.Key{key("default", "web")}, search("www.svc")); diff != "" {
		t.Errorf("after the status change (-want +got):\n%s", diff)
	}
	if got := search("redis"); len(got) != 0 {
		t.Errorf("after the deletion, redis finds %v", got)
	}
	if diff := cmp.Diff([]resource.Key{key("default", "api")}, search("241.0.0.3")); diff != "" {
		t.Errorf("the new service (-want +got):\n%s", diff)
	}
	if got := u.srv.byVIP(netip.MustParseAddr("241.0.0.3")); !cmp.Equal(got, []resource.Key{key("default", "api")}) {
		t.Errorf("byVIP: %v", got)
	}
}

// TestIndex_Paging checks offset and size over a search that matches many.
func TestIndex_Paging(t *testing.T) {
	objs := []*resource.Object{mesh("default")}
	for _, n := range []string{"a1", "a2", "b1", "a3", "a4"} {
		objs = append(objs, svc("default", n, nil, nil))
	}
	u := newUnit(t, objs)
	tests := []struct {
		offset, size int
		want         []string
	}{
		{0, 2, []string{"a1", "a2"}},
		{2, 2, []string{"a3", "a4"}},
		{4, 2, nil},
		{0, 10, []string{"a1", "a2", "a3", "a4"}},
	}
	for _, tt := range tests {
		keys, total, _ := u.srv.ix.search(serviceKinds, "default", parseQuery("a"), nil, tt.offset, tt.size)
		var got []string
		for _, k := range keys {
			got = append(got, k.Name)
		}
		if total != 4 || !cmp.Equal(got, tt.want) {
			t.Errorf("offset %d size %d: %v of %d, want %v of 4", tt.offset, tt.size, got, total, tt.want)
		}
	}
}

// TestIndex_KeepsWhatDNSCannotShow checks which services the index keeps:
// those whose status the DNS table does not show whole.
func TestIndex_KeepsWhatDNSCannotShow(t *testing.T) {
	withStatus := func(st *resource.ServiceStatus) *resource.Object {
		o := svc("default", "s", nil, nil)
		o.Status = nil
		if st != nil {
			o.Status = st
		}
		return o
	}
	vip := []resource.VIP{{IP: "241.0.0.1", Type: resource.VIPKuma}}
	tests := []struct {
		name string
		obj  *resource.Object
		keep bool
	}{
		{"no status", withStatus(nil), false},
		{"empty status", withStatus(&resource.ServiceStatus{}), false},
		{"names held, a VIP", withStatus(&resource.ServiceStatus{Addresses: []resource.Address{held("a.mesh", "g")}, VIPs: vip}), false},
		{"a name not available", withStatus(&resource.ServiceStatus{Addresses: []resource.Address{held("a.mesh", "g"), lost("b.mesh", "g", "taken")}, VIPs: vip}), true},
		{"names, no VIP", withStatus(&resource.ServiceStatus{Addresses: []resource.Address{held("a.mesh", "g")}}), true},
		{"a VIP, no name", withStatus(&resource.ServiceStatus{VIPs: vip}), true},
	}
	for _, tt := range tests {
		d, keep := digestOf(tt.obj)
		if keep != tt.keep {
			t.Errorf("%s: kept %v, want %v", tt.name, keep, tt.keep)
		}
		if keep && len(d.addrs)+len(d.vips) == 0 {
			t.Errorf("%s: kept with nothing", tt.name)
		}
	}
}

func isActive(ix *index) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.active
}

// TestIndex_RunDrainsAndStops checks the background loop: it applies
// changes without a request, and drops the index when ctx ends.
func TestIndex_RunDrainsAndStops(t *testing.T) {
	u := newUnit(t, []*resource.Object{mesh("default")})
	ix := u.srv.ix
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.srv.Run(ctx); close(done) }()
	u.write(t, svc("default", "redis", nil, []string{"241.0.0.1"})) // a VIP, no name: kept
	deadline := time.Now().Add(10 * time.Second)
	for {
		ix.mu.Lock()
		_, ok := ix.digests[key("default", "redis")]
		ix.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not apply the change within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if isActive(ix) {
		t.Fatal("the index outlived Run")
	}
}

func TestIndex_Lost(t *testing.T) {
	u := newUnit(t, []*resource.Object{
		mesh("default"), mesh("other"),
		svc("default", "a", nil, []string{"241.0.0.1"}, held("a.mesh", "gen1"), lost("x.mesh", "gen2", "taken by c")),
		svc("default", "b", nil, []string{"241.0.0.2"}, lost("x.mesh", "gen2", "taken by c"), lost("bad_name", "gen1", "invalid")),
		svc("default", "c", nil, []string{"241.0.0.3"}, held("x.mesh", "gen1")),
		svc("other", "d", nil, []string{"241.0.0.4"}, lost("x.mesh", "gen2", "other mesh")),
	})
	if n := u.srv.ix.size(); n != 3 {
		t.Errorf("the index keeps %d services, want 3 (c is healthy)", n)
	}
	l := u.srv.ix.lost(2)
	if l.total != 4 || len(l.all) != 2 {
		t.Fatalf("%d not available (%d kept), want 4 (2 kept)", l.total, len(l.all))
	}
	if diff := cmp.Diff(map[string]int{"gen1": 1, "gen2": 3}, l.lostCount); diff != "" {
		t.Errorf("lost per generator (-want +got):\n%s", diff)
	}
	if n := len(l.lostBy["gen2"]); n != 2 {
		t.Errorf("gen2 lost %d kept, want 2 (the limit)", n)
	}
	rows := u.srv.withHolders(l.all)
	if rows[0].Hostname != "bad_name" || rows[0].Holder != nil {
		t.Errorf("first row %+v, want bad_name held by no one", rows[0])
	}
	if rows[1].Hostname != "x.mesh" || rows[1].Holder == nil || *rows[1].Holder != key("default", "c") {
		t.Errorf("second row %+v, want x.mesh held by c (found through DNS)", rows[1])
	}
	if h := u.srv.holders("other", map[string]bool{"x.mesh": true}); len(h) != 0 {
		t.Errorf("x.mesh is held in mesh other by %v; hostnames are per mesh", h)
	}
}
