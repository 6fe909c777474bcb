package kube

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

// feedLog is the feed's live events as "rev put|delete name", in order.
func feedLog(f *feed) []string {
	var out []string
	for _, ev := range f.events {
		if ev.e == nil {
			continue
		}
		op := "put"
		if ev.e.tombstone() {
			op = "delete"
		}
		out = append(out, fmt.Sprintf("%d %s %s", ev.rev, op, ev.e.key.Name))
	}
	return out
}

// The feed keeps the last event of each resource in revision order,
// tombstones until they are compacted, and each entry's place through
// sweeps.
func TestFeed_LastEventOfEachResource(t *testing.T) {
	f := newFeed()
	live := map[resource.Key]*entry{}
	rev := int64(100)
	key := func(name string) resource.Key {
		return resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name}
	}
	put := func(name string) {
		rev++
		k := key(name)
		e := &entry{key: k, rev: rev, data: []byte{1}}
		f.add(e, live[k], 0)
		live[k] = e
	}
	del := func(name string, at time.Time) {
		rev++
		k := key(name)
		f.add(&entry{key: k, rev: rev}, live[k], at.UnixNano())
		delete(live, k)
	}
	old, recent := time.Unix(1000, 0), time.Unix(2000, 0)
	put("a")
	put("b")
	put("c")
	put("a")         // 104 supersedes 101
	del("b", old)    // 105 supersedes 102
	del("c", recent) // 106
	put("b")         // 107 supersedes the tombstone 105
	del("a", old)    // 108
	want := []string{"106 delete c", "107 put b", "108 delete a"}
	if diff := cmp.Diff(want, feedLog(&f)); diff != "" {
		t.Fatalf("feed (-want +got):\n%s", diff)
	}
	if len(f.tombs) != 2 {
		t.Errorf("%d tombstones, want those of a and c", len(f.tombs))
	}
	if got := f.events[f.after(106)].rev; got != 107 {
		t.Errorf("the first event after 106 is %d", got)
	}

	// Compaction drops the tombstones older than the cutoff, and readers
	// from before the newest dropped miss something.
	if n := f.compact(time.Unix(1500, 0)); n != 1 || f.start != 108 {
		t.Errorf("compact dropped %d, start %d; want 1 (a's), 108", n, f.start)
	}
	if diff := cmp.Diff([]string{"106 delete c", "107 put b"}, feedLog(&f)); diff != "" {
		t.Errorf("after compaction (-want +got):\n%s", diff)
	}

	// Many writes of one resource: swept, and its place kept.
	for range 3000 {
		put("b")
	}
	if len(f.events) > 2100 {
		t.Errorf("%d events for 2 resources after 3000 writes: not swept", len(f.events))
	}
	for _, e := range []*entry{live[key("b")], f.tombs[key("c")].e} {
		if f.events[e.pos].e != e {
			t.Errorf("%s is not at its place %d after sweeps", e.key.Name, e.pos)
		}
	}
	del("b", recent)
	if diff := cmp.Diff([]string{"106 delete c", fmt.Sprintf("%d delete b", rev)}, feedLog(&f)); diff != "" {
		t.Errorf("after the writes (-want +got):\n%s", diff)
	}
}

// A resource keeps the strings of its key for its life: a write of it
// reuses them, and every object read from the store shares them, so that
// the cache, the controllers and DNS, which keep keys of what they read,
// hold one copy of each Service's name rather than one per write they saw.
func TestStore_PutKeepsTheKeyStrings(t *testing.T) {
	s := &Store{refs: map[crRef]*entry{}, invalid: map[crRef]*decoded{}, stale: map[crRef]report{}, feed: newFeed(),
		progress: map[resource.Kind]int64{}, acks: newAcks(ackWindow), advanced: make(chan struct{}), changed: make(chan struct{})}
	write := func(version int64) *entry {
		// Strings of their own, as each watch event decodes them.
		name, mesh := fmt.Sprintf("web.%s", "shop"), fmt.Sprintf("de%s", "fault")
		obj := &resource.Object{Kind: resource.MeshService, Mesh: mesh, Name: name, Labels: map[string]string{}, Spec: &resource.MeshServiceSpec{}}
		s.put(decoded{ref: crRef{kind: resource.MeshService, namespace: "shop", name: "web"}, uid: uid{1}, version: version, obj: obj}, time.Unix(1000, 0))
		return s.refs[crRef{kind: resource.MeshService, namespace: "shop", name: "web"}]
	}
	first := write(1)
	second := write(2)
	if second == first || second.version != 2 {
		t.Fatalf("the second write did not make a new entry")
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	if !same(first.key.Name, second.key.Name) || !same(first.key.Mesh, second.key.Mesh) {
		t.Errorf("the second write's entry holds strings of its own: key %v", second.key)
	}
	o, err := second.object()
	if err != nil {
		t.Fatal(err)
	}
	if o.Key() != second.key || !same(o.Name, first.key.Name) || !same(o.Mesh, first.key.Mesh) {
		t.Errorf("a read of the resource holds strings of its own: %v", o.Key())
	}
}

// The store holds an entry per resource: it fits the 112-byte size class
// (a tombstone's time lives in the feed's map of tombstones, not in every
// entry).
func TestEntry_Size(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 112 {
		t.Errorf("an entry takes %d bytes, want at most 112", n)
	}
}
