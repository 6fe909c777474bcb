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

func newCache(t *testing.T) (*Cache, *faultyStore, *prometheus.Registry) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fs := &faultyStore{Store: st}
	reg := prometheus.NewRegistry()
	c := New(fs, slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
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

// Resources with the same labels share one map in the cache, a display
// name equal to the name is kept as a flag, and every reader still sees
// each resource's own labels, in a map it may change.
func TestCache_SharedLabelSets(t *testing.T) {
	c, st, _ := newCache(t)
	zone := map[string]string{"kuma.io/origin": "zone", "kuma.io/zone": "z1"}
	with := func(extra map[string]string) map[string]string {
		m := maps.Clone(zone)
		maps.Copy(m, extra)
		return m
	}
	objs := []*resource.Object{
		svc("default", "a", with(map[string]string{resource.LabelDisplayName: "a"})),
		svc("default", "b", with(map[string]string{resource.LabelDisplayName: "b"})),
		svc("default", "c", with(map[string]string{resource.LabelDisplayName: "other"})),
		svc("default", "d", with(nil)),
		svc("default", "e", nil),
		svc("default", "f", map[string]string{resource.LabelDisplayName: "f"}),
		// Synced from another zone: the display name begins the name.
		svc("default", "g-b2c4d6f8g9h2jk", with(map[string]string{resource.LabelDisplayName: "g"})),
		// A display name longer than the name, with the name as prefix.
		svc("default", "h", with(map[string]string{resource.LabelDisplayName: "hh"})),
	}
	var rev int64
	for _, o := range objs {
		rev = mustCreate(t, st, o).Revision
	}
	wait(t, c, rev)
	for _, o := range objs {
		got, ok := c.Get(o.Key())
		if !ok {
			t.Fatalf("%s missing", o.Name)
		}
		if diff := cmp.Diff(o.Labels, got.Labels); diff != "" {
			t.Errorf("%s labels (-stored +got):\n%s", o.Name, diff)
		}
		if got.Labels != nil {
			got.Labels["scribble"] = "x" // the caller's copy
		}
	}
	c.mu.RLock()
	sets := len(c.labels.sets)
	c.mu.RUnlock()
	if sets != 0 {
		t.Errorf("%d label sets held before freezing, want none (hot entries keep their own labels)", sets)
	}
	c.freeze(time.Now().Add(time.Hour))
	for _, o := range objs {
		if got, _ := c.Get(o.Key()); !cmp.Equal(o.Labels, got.Labels) {
			t.Errorf("%s labels once frozen: %v, want %v", o.Name, got.Labels, o.Labels)
		}
	}
	c.mu.RLock()
	sets = len(c.labels.sets)
	c.mu.RUnlock()
	// a, b, d and g share {origin, zone}; c and h have their own; f has
	// none left.
	if sets != 3 {
		t.Errorf("%d label sets held, want 3", sets)
	}
	for _, tc := range []struct{ name, want string }{{"a", "a"}, {"c", "other"}, {"g-b2c4d6f8g9h2jk", "g"}, {"h", "hh"}} {
		if got, ok := c.Label(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: tc.name}, resource.LabelDisplayName); !ok || got != tc.want {
			t.Errorf("Label(%s, display name) = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		filter map[string]string
		want   []string
	}{
		{map[string]string{resource.LabelDisplayName: "b"}, []string{"b"}},
		{map[string]string{resource.LabelDisplayName: "other"}, []string{"c"}},
		{map[string]string{resource.LabelDisplayName: "c"}, nil},
		{map[string]string{resource.LabelDisplayName: "g"}, []string{"g-b2c4d6f8g9h2jk"}},
		{map[string]string{resource.LabelDisplayName: "g-b2c4d6f8g9h2jk"}, nil},
		{map[string]string{resource.LabelDisplayName: "hh"}, []string{"h"}},
		{map[string]string{"kuma.io/zone": "z1"}, []string{"a", "b", "c", "d", "g-b2c4d6f8g9h2jk", "h"}},
		{map[string]string{"scribble": "x"}, nil},
	} {
		items, total := c.List(Query{Kind: resource.MeshService, Mesh: "default", Labels: tc.filter})
		var names []string
		for _, o := range items {
			names = append(names, o.Name)
		}
		if total != len(tc.want) || !cmp.Equal(names, tc.want) {
			t.Errorf("List(%v) = %v (total %d), want %v", tc.filter, names, total, tc.want)
		}
	}

	// Sets are dropped when their last user goes or changes labels.
	for _, name := range []string{"a", "b", "g-b2c4d6f8g9h2jk", "h"} {
		rev, _ = store.Delete(context.Background(), st, resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name}, 0)
	}
	cur, _ := c.Get(objs[2].Key())
	cur.Labels = with(map[string]string{resource.LabelDisplayName: "c"})
	upd, err := store.Update(context.Background(), st, cur)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, c, max(rev, upd.Revision))
	c.freeze(time.Now().Add(time.Hour))
	c.mu.RLock()
	sets = len(c.labels.sets)
	refs := c.labels.sets[setKey(zone, "")].refs
	c.mu.RUnlock()
	if sets != 1 || refs != 2 {
		t.Errorf("after deletes and an update: %d sets, the zone set used %d times; want 1 set used by c and d", sets, refs)
	}
	if got, _ := c.Get(objs[2].Key()); got.Labels[resource.LabelDisplayName] != "c" {
		t.Errorf("c's display name after update = %q", got.Labels[resource.LabelDisplayName])
	}
}

// frozenDocs are resources of every kind, services with a full status.
var frozenDocs = []string{`type: Mesh
name: default
`, `type: MeshService
name: web
mesh: default
labels:
  kuma.io/display-name: web
  team: a
spec:
  selector:
    dataplaneTags:
      kuma.io/service: web
  ports:
  - name: http
    port: 80
    targetPort: 8080
    appProtocol: http
  - port: 81
    targetPort: admin
  identities:
  - type: ServiceTag
    value: web_default_svc_80
`, `type: MeshExternalService
name: ext
mesh: default
labels:
  kuma.io/display-name: External
spec:
  match:
  - {type: Domain, value: example.com, port: 443, protocol: tls}
  - {type: InternalVIP, value: db.internal, port: 5432}
`, `type: MeshMultiZoneService
name: multi
mesh: default
spec:
  selector:
    meshService:
      matchLabels:
        team: a
  ports:
  - port: 80
    appProtocol: http
`, `type: HostnameGenerator
name: gen
spec:
  selector:
    meshService:
      matchLabels:
        team: a
  template: '{{ .DisplayName }}.team.mesh'
`, `type: Dataplane
name: dp-1
mesh: default
spec:
  networking:
    address: 10.1.0.1
    inbound:
    - port: 8080
      tags:
        kuma.io/service: web
`}

// A frozen entry reads back exactly as it was decoded, for every kind,
// and freezing leaves recent entries alone.
func TestCache_FreezeRoundTrip(t *testing.T) {
	c, st, reg := newCache(t)
	now := time.Unix(1_800_000_000, 0)
	var clockMu sync.Mutex
	c.mu.Lock()
	c.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	c.mu.Unlock()
	advance := func(d time.Duration) { clockMu.Lock(); now = now.Add(d); clockMu.Unlock() }

	var keys []resource.Key
	var rev int64
	for _, doc := range frozenDocs {
		o, err := resource.Decode([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		got := mustCreate(t, st, o)
		if d, _ := resource.Lookup(got.Kind); d.ServiceKind {
			status := d.NewStatus()
			*status.(resource.ServiceStatusOf).Service() = resource.ServiceStatus{
				Addresses: []resource.Address{{Hostname: got.Name + ".mesh.local", Status: resource.AddressAvailable,
					Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "gen"}}},
				VIPs: []resource.VIP{{IP: "241.0.0.1"}},
			}
			got.Status = status
			if got, err = store.UpdateStatus(context.Background(), st, got); err != nil {
				t.Fatal(err)
			}
		}
		keys = append(keys, got.Key())
		rev = got.Revision
	}
	wait(t, c, rev)
	hot := map[resource.Key]*resource.Object{}
	for _, k := range keys {
		o, ok := c.Get(k)
		if !ok {
			t.Fatalf("%s missing", k)
		}
		hot[k] = o
	}
	hotList, _ := c.List(Query{Kind: resource.MeshService})
	// A page encodes to what its resources' AppendJSON writes, hot or
	// frozen (then from the frozen JSON, without decoding).
	encoded := func(k resource.Key) string {
		t.Helper()
		p, total := c.Page(Query{Kind: k.Kind, Mesh: k.Mesh, NameContains: k.Name})
		b, err := p.AppendJSON([]byte("["))
		if err != nil || p.Len() != 1 || total != 1 {
			t.Fatalf("page of %s: %d of %d, %v", k, p.Len(), total, err)
		}
		return string(b)
	}
	wantJSON := map[resource.Key]string{}
	for _, k := range keys {
		b, err := hot[k].AppendJSON([]byte("["))
		if err != nil {
			t.Fatal(err)
		}
		wantJSON[k] = string(b)
		if got := encoded(k); got != wantJSON[k] {
			t.Errorf("page of hot %s:\n%s\nwant\n%s", k, got, wantJSON[k])
		}
	}
	// AppendJSONAt writes the same document at the resource's revision,
	// and nothing at another.
	documentsAre := func(when string) {
		t.Helper()
		for _, k := range keys {
			b, ok, err := c.AppendJSONAt([]byte("["), k, hot[k].Revision)
			if !ok || err != nil || string(b) != wantJSON[k] {
				t.Errorf("%s: AppendJSONAt(%s) = %s, %v, %v\nwant %s", when, k, b, ok, err, wantJSON[k])
			}
			if b, ok, _ := c.AppendJSONAt(nil, k, hot[k].Revision+1); ok || len(b) != 0 {
				t.Errorf("%s: AppendJSONAt(%s) at another revision wrote %q", when, k, b)
			}
		}
		if _, ok, _ := c.AppendJSONAt(nil, resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "absent"}, rev); ok {
			t.Errorf("%s: AppendJSONAt of an absent key says it is there", when)
		}
	}
	documentsAre("hot")
	revisionsAre := func(when string) {
		t.Helper()
		for _, k := range keys {
			if rev, ok := c.RevisionOf(k); !ok || rev != hot[k].Revision {
				t.Errorf("%s: RevisionOf(%s) = %d, %v, want %d", when, k, rev, ok, hot[k].Revision)
			}
		}
		if _, ok := c.RevisionOf(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "absent"}); ok {
			t.Errorf("%s: RevisionOf an absent key says it is there", when)
		}
	}
	revisionsAre("hot")
	// Scan and Keys see what List sees; Scan shares hot objects.
	scanAll := func() []*resource.Object {
		var out []*resource.Object
		for _, k := range keys {
			c.Scan(Query{Kind: k.Kind, Mesh: k.Mesh}, func(o *resource.Object) { out = append(out, o) })
		}
		return out
	}
	first, second := scanAll(), scanAll()
	for i, k := range keys {
		if diff := cmp.Diff(hot[k], first[i]); diff != "" {
			t.Errorf("Scan of hot %s (-Get +Scan):\n%s", k, diff)
		}
		if first[i] != second[i] {
			t.Errorf("Scan copied hot %s", k)
		}
	}
	if got := c.Keys(Query{Kind: resource.MeshService, Mesh: "default"}); !cmp.Equal(got, []resource.Key{keys[1]}) {
		t.Errorf("Keys = %v", got)
	}

	// The feed handed over the store's encodings, which the freeze takes
	// rather than encode the objects again (and must read back as they
	// were, below).
	c.mu.RLock()
	for _, k := range keys {
		if e := c.groups[group{k.Kind, k.Mesh}][k.Name]; e.enc == nil {
			t.Errorf("%s: the feed's encoding was not kept", k)
		}
	}
	c.mu.RUnlock()
	if n := c.freeze(now.Add(-FreezeAfter)); n != 0 {
		t.Fatalf("froze %d entries stored just now", n)
	}
	if n := testutil.ToFloat64(c.decoded); n != float64(len(keys)) {
		t.Errorf("meshnames_cache_decoded_objects = %v before the freeze, want %d", n, len(keys))
	}
	advance(FreezeAfter)
	if n := c.freeze(now.Add(-FreezeAfter)); n != len(keys) {
		t.Fatalf("froze %d entries, want %d", n, len(keys))
	}
	if n := testutil.ToFloat64(c.frozenTotal); n != float64(len(keys)) || c.Frozen() != uint64(len(keys)) {
		t.Errorf("meshnames_cache_frozen_total = %v, Frozen() = %d, want %d", n, c.Frozen(), len(keys))
	}
	if n := testutil.ToFloat64(c.decoded); n != 0 {
		t.Errorf("meshnames_cache_decoded_objects = %v after the freeze, want 0", n)
	}
	_ = reg
	revisionsAre("frozen")
	for _, k := range keys {
		o, _ := c.Get(k)
		if diff := cmp.Diff(hot[k], o); diff != "" {
			t.Errorf("%s frozen and read back (-hot +frozen):\n%s", k, diff)
		}
		if o.Labels != nil {
			o.Labels["scribble"] = "x" // the caller's own copy
		}
	}
	for i, o := range scanAll() {
		if diff := cmp.Diff(hot[keys[i]], o); diff != "" {
			t.Errorf("Scan of frozen %s (-hot +frozen):\n%s", keys[i], diff)
		}
	}
	for _, k := range keys {
		if got := encoded(k); got != wantJSON[k] {
			t.Errorf("page of frozen %s:\n%s\nwant\n%s", k, got, wantJSON[k])
		}
	}
	documentsAre("frozen")
	if coldList, _ := c.List(Query{Kind: resource.MeshService}); !cmp.Equal(hotList, coldList) {
		t.Errorf("List after freezing differs:\n%s", cmp.Diff(hotList, coldList))
	}
	if items, _ := c.List(Query{Kind: resource.MeshService, Labels: map[string]string{"team": "a", resource.LabelDisplayName: "web"}}); len(items) != 1 {
		t.Errorf("label filter on a frozen entry found %d", len(items))
	}

	// A change makes the entry hot again, with the new content.
	web := hot[keys[1]].Clone()
	web.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 90
	upd, err := store.Update(context.Background(), st, web)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, c, upd.Revision)
	if n := c.freeze(now.Add(-FreezeAfter)); n != 0 {
		t.Errorf("froze %d entries after a change", n)
	}
	if n := testutil.ToFloat64(c.decoded); n != 1 {
		t.Errorf("meshnames_cache_decoded_objects = %v after a change, want 1", n)
	}
	if o, _ := c.Get(keys[1]); o.Spec.(*resource.MeshServiceSpec).Ports[0].Port != 90 || o.Version != upd.Version {
		t.Errorf("updated entry reads %+v", o)
	}
}

// Freezing while writers change the same resources loses nothing.
func TestCache_FreezeConcurrentWrites(t *testing.T) {
	c, st, _ := newCache(t)
	const n = 50
	ctx := context.Background()
	for i := range n {
		mustCreate(t, st, svc("default", fmt.Sprintf("s%02d", i), map[string]string{"i": fmt.Sprint(i)}))
	}
	done := make(chan struct{})
	var last int64 // revision of the last write, read after done
	go func() {
		defer close(done)
		for round := range 5 {
			for i := range n {
				o, err := st.Get(ctx, resource.Key{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("s%02d", i)})
				if err != nil {
					t.Error(err)
					return
				}
				o.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 1000 + round
				upd, err := store.Update(ctx, st, o)
				if err != nil {
					t.Error(err)
					return
				}
				last = upd.Revision
			}
		}
	}()
	for {
		c.freeze(time.Now().Add(time.Hour)) // everything is old enough
		for i := range n {
			c.Get(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("s%02d", i)})
		}
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	wait(t, c, last)
	c.freeze(time.Now().Add(time.Hour))
	for i := range n {
		k := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("s%02d", i)}
		want, _ := st.Get(ctx, k)
		got, _ := c.Get(k)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-store +cache):\n%s", k, diff)
		}
	}
}

// hotEntries returns the names of the entries held decoded that count
// against the bound, and checks that the cache's count of them agrees;
// and the names of the listed ones held decoded.
func hotEntries(t *testing.T, c *Cache) (counted, listed map[string]bool) {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	counted, listed = map[string]bool{}, map[string]bool{}
	for _, m := range c.groups {
		for name, e := range m {
			switch {
			case e.hot == nil:
			case e.listed:
				listed[name] = true
			default:
				counted[name] = true
			}
		}
	}
	if c.hot != len(counted) {
		t.Errorf("the cache counts %d hot entries, holds %d", c.hot, len(counted))
	}
	return counted, listed
}

// More than maxHot decoded entries from the change feed wake the freezer,
// which freezes the oldest down to half the bound whatever their age; the
// age rule still freezes old entries below the bound. Entries of a list
// do not count, and only age freezes them.
func TestCache_BoundsDecodedEntries(t *testing.T) {
	c := New(nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	c.maxHot = 10
	now := time.Unix(1_800_000_000, 0)
	c.now = func() time.Time { return now }
	put := func(name string, listed bool) {
		now = now.Add(time.Second)
		c.mu.Lock()
		c.put(svc("default", name, map[string]string{"name": name}), listed, nil)
		c.mu.Unlock()
	}
	for i := range 3 {
		put(fmt.Sprintf("l%d", i), true)
	}
	for i := range 10 {
		put(fmt.Sprintf("s%02d", i), false)
	}
	if len(c.pressure) != 0 {
		t.Fatalf("the freezer was woken at %d hot entries, bound %d", c.hot, c.maxHot)
	}
	for i := 10; i < 25; i++ {
		put(fmt.Sprintf("s%02d", i), false)
	}
	if len(c.pressure) != 1 {
		t.Fatalf("the freezer was not woken at %d hot entries, bound %d", c.hot, c.maxHot)
	}
	// Replacing a hot entry and removing one keep the count true.
	put("s24", false)
	c.mu.Lock()
	c.remove(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "s23"})
	c.mu.Unlock()
	if got, listed := hotEntries(t, c); len(got) != 24 || len(listed) != 3 {
		t.Fatalf("%d hot entries and %d listed, want 24 and 3", len(got), len(listed))
	}
	// All are younger than FreezeAfter: only the bound applies, to the
	// entries of the feed.
	if n := c.freeze(now.Add(-FreezeAfter)); n != 19 {
		t.Errorf("froze %d entries, want 19 (24 down to 5)", n)
	}
	want := map[string]bool{"s19": true, "s20": true, "s21": true, "s22": true, "s24": true}
	if got, listed := hotEntries(t, c); !maps.Equal(got, want) || len(listed) != 3 {
		t.Errorf("hot after the bound: %v and listed %v, want the newest %v and the 3 listed", got, listed, want)
	}
	if n := c.freeze(now.Add(-FreezeAfter)); n != 0 {
		t.Errorf("froze %d more entries within the bound", n)
	}
	// Below the bound, age decides: the listed entries, s19 and s20 are
	// older than the cutoff.
	if n := c.freeze(now.Add(-5 * time.Second)); n != 5 {
		t.Errorf("froze %d entries older than the cutoff, want 5", n)
	}
	if got, listed := hotEntries(t, c); len(got) != 3 || got["s19"] || got["s20"] || len(listed) != 0 {
		t.Errorf("hot after the age cutoff: %v, listed %v", got, listed)
	}
	if n := testutil.ToFloat64(c.decoded); n != 3 {
		t.Errorf("meshnames_cache_decoded_objects = %v, want 3", n)
	}
	names := []string{"l0", "l1", "l2"}
	for i := range 25 {
		names = append(names, fmt.Sprintf("s%02d", i))
	}
	for _, name := range names {
		k := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name}
		o, ok := c.Get(k)
		if name == "s23" {
			if ok {
				t.Errorf("removed %s still read", k)
			}
			continue
		}
		if !ok || o.Labels["name"] != name || o.Spec.(*resource.MeshServiceSpec).Ports[0].Port != 80 {
			t.Errorf("%s reads %+v after freezing", k, o)
		}
	}
	// The freezer's candidates, kept for the next freeze, hold no
	// resource.
	c.freezeMu.Lock()
	for i, cd := range c.candidates[:cap(c.candidates)] {
		if cd.obj != nil || cd.enc != nil || cd.name != "" {
			t.Errorf("candidate %d kept after freezing: %s", i, cd.name)
		}
	}
	c.freezeMu.Unlock()
}

// A burst of changes past the bound is frozen without waiting for the
// periodic pass (every FreezeAfter/3).
func TestCache_BurstWakesFreezer(t *testing.T) {
	c, st, _ := newCache(t)
	c.mu.Lock()
	c.maxHot = 8
	c.mu.Unlock()
	var rev int64
	for i := range 30 {
		rev = mustCreate(t, st, svc("default", fmt.Sprintf("s%02d", i), nil)).Revision
	}
	wait(t, c, rev)
	deadline := time.Now().Add(FreezeAfter / 6)
	for hot, _ := hotEntries(t, c); len(hot) > 8; hot, _ = hotEntries(t, c) {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries still hot, bound 8", len(hot))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c.Frozen() < 22 {
		t.Errorf("Frozen() = %d, want at least 22", c.Frozen())
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
