package cache

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

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
	refs := c.labels.sets[setKey(zone, 0)].refs
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
// A frozen entry reads as it did decoded, whether the cache encoded it
// or holds the store's own copy (store.Keeper; one key refused, which the
// cache then encodes itself).
func TestCache_FreezeRoundTrip(t *testing.T) {
	t.Run("own encoding", func(t *testing.T) { testFreezeRoundTrip(t, nil) })
	t.Run("store's copy", func(t *testing.T) {
		testFreezeRoundTrip(t, &keepingStore{refuse: map[resource.Key]bool{
			{Kind: resource.MeshService, Mesh: "default", Name: "web"}: true,
		}})
	})
}

func testFreezeRoundTrip(t *testing.T, keeper *keepingStore) {
	var wrap func(*faultyStore) store.Store
	if keeper != nil {
		wrap = func(fs *faultyStore) store.Store { keeper.faultyStore = fs; return keeper }
	}
	c, st, reg := newCacheOf(t, wrap)
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
	// Each frozen entry holds one form: the store's copy where the store
	// keeps one, else its own encoding.
	c.mu.RLock()
	for _, k := range keys {
		e := c.groups[group{k.Kind, k.Mesh}][k.Name]
		wantKept := keeper != nil && !keeper.refuse[k]
		if (e.kept != nil) != wantKept || (e.cold != nil) == wantKept {
			t.Errorf("%s frozen: store's copy %v, own encoding %v; want the store's copy %v", k, e.kept != nil, e.cold != nil, wantKept)
		}
	}
	c.mu.RUnlock()
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
	c.SetMaxDecoded(10)
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
	c.SetMaxDecoded(8)
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
