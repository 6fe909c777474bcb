package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// faultyStore injects errors into the change feed.
type faultyStore struct {
	store.Store
	mu   sync.Mutex
	errs []error // returned by the next Changes calls, in order
}

func (f *faultyStore) inject(err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

func (f *faultyStore) Changes(ctx context.Context, after int64, limit int) ([]store.Event, error) {
	f.mu.Lock()
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		f.mu.Unlock()
		return nil, err
	}
	f.mu.Unlock()
	return f.Store.Changes(ctx, after, limit)
}

// keepingStore is a store.Keeper: it hands the cache a copy of the
// revision asked for, unless the key is in refuse.
type keepingStore struct {
	*faultyStore
	refuse map[resource.Key]bool
}

func (k *keepingStore) Kept(key resource.Key, rev int64) (store.Kept, bool) {
	o, err := k.Get(context.Background(), key)
	if err != nil || o.Revision != rev || k.refuse[key] {
		return nil, false
	}
	return keptObject{o}, true
}

type keptObject struct{ o *resource.Object }

func (k keptObject) Object() (*resource.Object, error)   { return k.o.Clone(), nil }
func (k keptObject) AppendJSON(b []byte) ([]byte, error) { return k.o.AppendJSON(b) }
func (k keptObject) Revision() int64                     { return k.o.Revision }

func newCache(t *testing.T) (*Cache, *faultyStore, *prometheus.Registry) {
	t.Helper()
	return newCacheOf(t, nil)
}

// newCacheOf is newCache over wrap's store, when wrap is not nil.
func newCacheOf(t *testing.T, wrap func(*faultyStore) store.Store) (*Cache, *faultyStore, *prometheus.Registry) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fs := &faultyStore{Store: st}
	var over store.Store = fs
	if wrap != nil {
		over = wrap(fs)
	}
	reg := prometheus.NewRegistry()
	c := New(over, slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// The cache lists the (empty) store first: a test's writes then reach
	// it through the change feed, with their encodings, whether or not
	// the machine is slow to run the cache's goroutine. (Written before
	// that list, they arrived listed and without encodings, which
	// TestCache_FreezeRoundTrip saw fail under load.)
	deadline := time.Now().Add(10 * time.Second)
	for synced, _ := c.Status(); !synced; synced, _ = c.Status() {
		if time.Now().After(deadline) {
			t.Fatal("the cache did not load the empty store within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	return c, fs, reg
}

func svc(mesh, name string, labels map[string]string) *resource.Object {
	return &resource.Object{Kind: resource.MeshService, Mesh: mesh, Name: name, Labels: labels,
		Spec: &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 80, AppProtocol: "tcp"}}}}
}

func mustCreate(t *testing.T, st store.Store, o *resource.Object) *resource.Object {
	t.Helper()
	got, err := store.Create(context.Background(), st, o)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func wait(t *testing.T, c *Cache, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitFor(ctx, rev); err != nil {
		t.Fatalf("cache did not reach revision %d (at %d): %v", rev, c.Revision(), err)
	}
}

func TestCache_FollowsWritesAndDeletes(t *testing.T) {
	c, st, reg := newCache(t)
	a := mustCreate(t, st, svc("default", "a", nil))
	wait(t, c, a.Revision)
	got, ok := c.Get(a.Key())
	if !ok || got.Version != 1 {
		t.Fatalf("Get after create = %v, %v", got, ok)
	}

	a.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 81
	upd, err := store.Update(context.Background(), st, a)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, c, upd.Revision)
	got, _ = c.Get(a.Key())
	if p := got.Spec.(*resource.MeshServiceSpec).Ports[0].Port; p != 81 {
		t.Errorf("port after update = %d, want 81", p)
	}

	rev, err := store.Delete(context.Background(), st, a.Key(), 0)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, c, rev)
	if _, ok := c.Get(a.Key()); ok {
		t.Errorf("Get after delete found the resource")
	}
	if n := testutil.ToFloat64(c.objectsGauge.WithLabelValues("MeshService")); n != 0 {
		t.Errorf("objects gauge = %v after delete, want 0", n)
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("gather metrics: %v", err)
	}
}

func TestCache_ReturnsCopies(t *testing.T) {
	c, st, _ := newCache(t)
	a := mustCreate(t, st, svc("default", "a", map[string]string{"team": "x"}))
	wait(t, c, a.Revision)
	got, _ := c.Get(a.Key())
	got.Labels["team"] = "mutated"
	got.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 1
	items, _ := c.List(Query{Kind: resource.MeshService, Mesh: "default"})
	items[0].Labels["team"] = "mutated-too"
	again, _ := c.Get(a.Key())
	if again.Labels["team"] != "x" || again.Spec.(*resource.MeshServiceSpec).Ports[0].Port != 80 {
		t.Errorf("mutating returned objects changed the cache: %v", again)
	}
}

func TestCache_ListOrderPagesFilters(t *testing.T) {
	c, st, _ := newCache(t)
	for i := range 12 {
		team := "a"
		if i%3 == 0 {
			team = "b"
		}
		mustCreate(t, st, svc("m1", fmt.Sprintf("s%02d", 11-i), map[string]string{"team": team}))
	}
	last := mustCreate(t, st, svc("m0", "z", nil)).Revision
	wait(t, c, last)

	names := func(objs []*resource.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.Mesh+"/"+o.Name)
		}
		return out
	}
	tests := []struct {
		name  string
		q     Query
		want  []string
		total int
	}{
		{"first-page", Query{Kind: resource.MeshService, Mesh: "m1", Size: 3}, []string{"m1/s00", "m1/s01", "m1/s02"}, 12},
		{"offset", Query{Kind: resource.MeshService, Mesh: "m1", Offset: 10, Size: 3}, []string{"m1/s10", "m1/s11"}, 12},
		{"past-end", Query{Kind: resource.MeshService, Mesh: "m1", Offset: 50, Size: 3}, nil, 12},
		{"filter", Query{Kind: resource.MeshService, Mesh: "m1", Labels: map[string]string{"team": "b"}}, []string{"m1/s02", "m1/s05", "m1/s08", "m1/s11"}, 4},
		{"filter-missing-label", Query{Kind: resource.MeshService, Mesh: "m0", Labels: map[string]string{"team": ""}}, nil, 0},
		{"all-meshes-ordered", Query{Kind: resource.MeshService, Size: 2}, []string{"m0/z", "m1/s00"}, 13},
		{"offset-across-meshes", Query{Kind: resource.MeshService, Offset: 1, Size: 2}, []string{"m1/s00", "m1/s01"}, 13},
		{"offset-into-second-mesh", Query{Kind: resource.MeshService, Offset: 12, Size: 5}, []string{"m1/s11"}, 13},
		{"offset-no-size", Query{Kind: resource.MeshService, Offset: 11}, []string{"m1/s10", "m1/s11"}, 13},
		{"other-kind", Query{Kind: resource.Dataplane}, nil, 0},
		{"name-contains", Query{Kind: resource.MeshService, NameContains: "1"}, []string{"m1/s01", "m1/s10", "m1/s11"}, 3},
		{"name-contains-page", Query{Kind: resource.MeshService, NameContains: "1", Offset: 1, Size: 1}, []string{"m1/s10"}, 3},
		{"name-exact", Query{Kind: resource.MeshService, Mesh: "m0", NameContains: "z"}, []string{"m0/z"}, 1},
		{"name-and-labels", Query{Kind: resource.MeshService, NameContains: "s0", Labels: map[string]string{"team": "b"}}, []string{"m1/s02", "m1/s05", "m1/s08"}, 3},
		{"name-none", Query{Kind: resource.MeshService, NameContains: "nope"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, total := c.List(tt.q)
			if d := cmp.Diff(tt.want, names(items)); d != "" || total != tt.total {
				t.Errorf("List(%+v) total %d (want %d), items (-want +got):\n%s", tt.q, total, tt.total, d)
			}
		})
	}
	// Every page without a filter (which skips to the page) is the slice of
	// the whole list that the page names.
	for offset := range 15 {
		for size := range 4 {
			fast, ft := c.List(Query{Kind: resource.MeshService, Offset: offset, Size: size})
			var walked []*resource.Object
			total := 0
			all, _ := c.List(Query{Kind: resource.MeshService})
			for _, o := range all {
				if total >= offset && (size == 0 || len(walked) < size) {
					walked = append(walked, o)
				}
				total++
			}
			if d := cmp.Diff(names(walked), names(fast)); d != "" || ft != total {
				t.Errorf("offset %d size %d: total %d (want %d), items (-want +got):\n%s", offset, size, ft, total, d)
			}
		}
	}
	if n := c.Count(resource.MeshService, "m1"); n != 12 {
		t.Errorf("Count(m1) = %d, want 12", n)
	}
	// Unordered Keys and Scan select what the ordered ones do (without
	// the paging, which they ignore), in any order.
	for _, tt := range tests {
		q := tt.q
		q.Offset, q.Size = 0, 0
		var want, keys, scanned []string
		for _, k := range c.Keys(q) {
			want = append(want, k.Mesh+"/"+k.Name)
		}
		q.Unordered = true
		for _, k := range c.Keys(q) {
			keys = append(keys, k.Mesh+"/"+k.Name)
		}
		c.Scan(q, func(o *resource.Object) { scanned = append(scanned, o.Mesh+"/"+o.Name) })
		slices.Sort(keys)
		slices.Sort(scanned)
		if d := cmp.Diff(want, keys); d != "" {
			t.Errorf("%s: unordered Keys (-ordered +unordered):\n%s", tt.name, d)
		}
		if d := cmp.Diff(want, scanned); d != "" {
			t.Errorf("%s: unordered Scan (-ordered +unordered):\n%s", tt.name, d)
		}
	}
}

func TestCache_RelistsWhenCompacted(t *testing.T) {
	c, st, _ := newCache(t)
	a := mustCreate(t, st, svc("default", "a", nil))
	wait(t, c, a.Revision)
	relists := testutil.ToFloat64(c.relists)

	st.inject(store.ErrCompacted)
	b := mustCreate(t, st, svc("default", "b", nil))
	wait(t, c, b.Revision)
	if _, ok := c.Get(b.Key()); !ok {
		t.Errorf("cache lacks b after relisting")
	}
	if got := testutil.ToFloat64(c.relists); got != relists+1 {
		t.Errorf("relists = %v, want %v", got, relists+1)
	}
}

func TestCache_KeepsServingWhileStoreFails(t *testing.T) {
	c, st, _ := newCache(t)
	a := mustCreate(t, st, svc("default", "a", nil))
	wait(t, c, a.Revision)

	boom := fmt.Errorf("connection refused: %w", store.ErrUnavailable)
	for range 3 {
		st.inject(boom)
	}
	b := mustCreate(t, st, svc("default", "b", nil)) // wakes the cache into the failures
	deadline := time.Now().Add(10 * time.Second)
	sawErr := false
	for time.Now().Before(deadline) {
		if _, err := c.Status(); errors.Is(err, store.ErrUnavailable) {
			sawErr = true
		}
		if _, ok := c.Get(a.Key()); !ok {
			t.Fatalf("cache stopped serving a while the store failed")
		}
		if c.Revision() >= b.Revision {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wait(t, c, b.Revision)
	if !sawErr {
		t.Errorf("Status never reported the store error")
	}
	if synced, err := c.Status(); !synced || err != nil {
		t.Errorf("after recovery Status = %v, %v; want synced and no error", synced, err)
	}
}

func TestCache_SubscribersSeeChangedKeys(t *testing.T) {
	c, st, _ := newCache(t)
	var mu sync.Mutex
	seen := map[resource.Key]int{}
	cancel := c.Subscribe(func(keys []resource.Key) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			seen[k]++
		}
	})
	a := mustCreate(t, st, svc("default", "a", nil))
	rev, err := store.Delete(context.Background(), st, a.Key(), 0)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, c, rev)
	// Subscribers are told right after the revision moves: poll.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := seen[a.Key()]
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscriber was not told of %s", a.Key())
		}
	}

	// A relist tells every key, also of resources that disappeared.
	b := mustCreate(t, st, svc("default", "b", nil))
	wait(t, c, b.Revision)
	mu.Lock()
	clear(seen)
	mu.Unlock()
	st.inject(store.ErrCompacted)
	cc := mustCreate(t, st, svc("default", "c", nil))
	wait(t, c, cc.Revision)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		ok := seen[b.Key()] > 0 && seen[cc.Key()] > 0
		saw := maps.Clone(seen)
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a relist the subscriber saw %v; want b and c", saw)
		}
	}

	cancel()
	d := mustCreate(t, st, svc("default", "d", nil))
	wait(t, c, d.Revision)
	mu.Lock()
	defer mu.Unlock()
	if seen[d.Key()] != 0 {
		t.Errorf("cancelled subscriber was still told of %s", d.Key())
	}
}

// Label reads a label of a hot or frozen entry without decoding it.
func TestCache_Label(t *testing.T) {
	c := New(nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	c.mu.Lock()
	c.put(svc("default", "web", map[string]string{"team": "a", resource.LabelDisplayName: "web"}), false, nil)
	c.put(svc("default", "db", map[string]string{resource.LabelDisplayName: "database"}), false, nil)
	c.mu.Unlock()
	k := func(name string) resource.Key {
		return resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name}
	}
	check := func(state string) {
		t.Helper()
		for _, c0 := range []struct {
			name, label, want string
			ok                bool
		}{
			{"web", "team", "a", true},
			{"web", resource.LabelDisplayName, "web", true},
			{"db", resource.LabelDisplayName, "database", true},
			{"web", "absent", "", false},
			{"db", "team", "", false},
			{"nope", "team", "", false},
		} {
			if got, ok := c.Label(k(c0.name), c0.label); got != c0.want || ok != c0.ok {
				t.Errorf("%s: Label(%s, %s) = %q, %v; want %q, %v", state, c0.name, c0.label, got, ok, c0.want, c0.ok)
			}
		}
	}
	check("hot")
	if n := c.freeze(time.Now().Add(time.Hour)); n != 2 {
		t.Fatalf("froze %d", n)
	}
	check("frozen")
}

// MeshServices made from Kubernetes Services differ in their names, and
// in the labels their names give (display name, service name, namespace):
// frozen, they share one label set and read back their own labels.
func TestCache_KubernetesServicesShareLabels(t *testing.T) {
	c := New(nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	labels := func(name, ns string) map[string]string {
		return map[string]string{resource.LabelDisplayName: name, resource.LabelServiceName: name, resource.LabelNamespace: ns,
			resource.LabelZone: "east", resource.LabelManagedBy: resource.ManagedByKubernetes}
	}
	objs := []*resource.Object{
		svc("default", "redis.shop", labels("redis", "shop")),
		svc("default", "redis.web", labels("redis", "web")),
		svc("default", "orders.shop", labels("orders", "shop")),
		// A headless Service's Pod: its service name is not its display name.
		svc("default", "db-0.shop", map[string]string{resource.LabelDisplayName: "db-0", resource.LabelServiceName: "db", resource.LabelNamespace: "shop",
			resource.LabelZone: "east", resource.LabelManagedBy: resource.ManagedByKubernetes}),
	}
	c.mu.Lock()
	for _, o := range objs {
		c.put(o.Clone(), false, nil)
	}
	c.mu.Unlock()
	if n := c.freeze(time.Now().Add(time.Hour)); n != len(objs) {
		t.Fatalf("froze %d", n)
	}
	if n := len(c.labels.sets); n != 2 {
		t.Errorf("%d label sets, want 2 (the Services', the Pod's)", n)
	}
	for _, o := range objs {
		got, ok := c.Get(o.Key())
		if !ok {
			t.Fatalf("%s: not found", o.Name)
		}
		if diff := cmp.Diff(o.Labels, got.Labels); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", o.Name, diff)
		}
		for k, v := range o.Labels {
			if got, ok := c.Label(o.Key(), k); !ok || got != v {
				t.Errorf("%s: Label(%s) = %q, %v; want %q", o.Name, k, got, ok, v)
			}
		}
		b, ok, err := c.AppendJSONAt(nil, o.Key(), 0)
		if err != nil || !ok {
			t.Fatalf("%s: AppendJSONAt: %v, %v", o.Name, ok, err)
		}
		doc, err := resource.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(o.Labels, doc.Labels); diff != "" {
			t.Errorf("%s labels of its document (-want +got):\n%s", o.Name, diff)
		}
	}
}

// TestCache_At checks that At returns a resource only at the revision the
// cache holds, hot or frozen.
func TestCache_At(t *testing.T) {
	c := New(nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	web := svc("default", "web", map[string]string{"team": "a"})
	web.Revision = 7
	c.mu.Lock()
	c.put(web, false, nil)
	c.mu.Unlock()
	gone := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "gone"}
	check := func(state string) {
		t.Helper()
		for _, tc := range []struct {
			k   resource.Key
			rev int64
			ok  bool
		}{{web.Key(), 7, true}, {web.Key(), 6, false}, {web.Key(), 8, false}, {gone, 7, false}} {
			obj, ok := c.At(tc.k, tc.rev)
			if ok != tc.ok {
				t.Errorf("%s: At(%s, %d) reports %v, want %v", state, tc.k.Name, tc.rev, ok, tc.ok)
				continue
			}
			if ok && (obj.Revision != 7 || obj.Labels["team"] != "a") {
				t.Errorf("%s: At(%s, %d) = revision %d, labels %v", state, tc.k.Name, tc.rev, obj.Revision, obj.Labels)
			}
		}
	}
	check("hot")
	if n := c.freeze(time.Now().Add(time.Hour)); n != 1 {
		t.Fatalf("froze %d", n)
	}
	check("frozen")
}

// BenchmarkLabelSetsHold is the freezer's interning of a synced service's
// labels: a set that exists, the display name left out (it begins the
// name).
func BenchmarkLabelSetsHold(b *testing.B) {
	s := newLabelSets()
	labels := map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelZone: "z3",
		resource.LabelDisplayName: "svc-1234", "team": "payments"}
	s.hold("svc-1234-fffq58zsh46p9m", labels)
	b.ReportAllocs()
	for b.Loop() {
		s.hold("svc-1234-fffq58zsh46p9m", labels)
	}
	if len(s.sets) != 1 {
		b.Fatalf("%d sets, want 1", len(s.sets))
	}
}
