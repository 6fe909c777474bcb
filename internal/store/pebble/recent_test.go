package pebble

import (
	"context"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// TestRecent_SameAsTheDatabase checks that Changes served from memory
// equals Changes read from the revision keys.
func TestRecent_SameAsTheDatabase(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.RecentMatchesDatabase(t, s, &s.recent, func(ctx context.Context, after int64, limit int) ([]store.Event, error) {
		return s.changesFromDB(ctx, after, s.synced.last.Load(), limit, nil)
	})
}

// TestChangesSkipping checks that the feed read from the database leaves
// the puts skip names unread (no object) and is otherwise Changes: the same
// events, revisions and objects, deletions included.
func TestChangesSkipping(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	svc := func(name string) *resource.Object {
		return &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: name,
			Spec: &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 80}}}}
	}
	ops := []store.Op{{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}}}
	for _, n := range []string{"a", "b", "c", "gone"} {
		ops = append(ops, store.Op{Type: store.OpCreate, Object: svc(n)})
	}
	if _, err := s.Apply(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	gone := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "gone"}
	if rs, err := s.Apply(ctx, store.Op{Type: store.OpDelete, Key: gone}); err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	s.recent.Clear() // the database's feed, as a reader behind Recent reads it
	all, err := s.Changes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	revs := map[resource.Key]int64{}
	for _, ev := range all {
		revs[ev.Key] = ev.Revision
	}
	b := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "b"}
	var asked []resource.Key
	skipped, err := s.ChangesSkipping(ctx, 0, 0, func(k resource.Key, rev int64) bool {
		asked = append(asked, k)
		if rev != revs[k] {
			t.Errorf("skip asked about %s at revision %d, the feed has %d", k, rev, revs[k])
		}
		return k == b
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != len(all) || len(asked) != len(all) {
		t.Fatalf("%d events, %d asked about; Changes has %d", len(skipped), len(asked), len(all))
	}
	for i, ev := range skipped {
		want := all[i]
		if ev.Key != want.Key || ev.Revision != want.Revision || ev.Type != want.Type {
			t.Errorf("event %d: %s %v at %d, Changes has %s %v at %d", i, ev.Key, ev.Type, ev.Revision, want.Key, want.Type, want.Revision)
		}
		switch {
		case ev.Key == b && ev.Object != nil:
			t.Errorf("%s was skipped but read", b)
		case ev.Key != b && (ev.Object == nil) != (want.Object == nil):
			t.Errorf("%s: object %v, Changes has %v", ev.Key, ev.Object, want.Object)
		case ev.Key != b && ev.Object != nil && ev.Object.Name != want.Object.Name:
			t.Errorf("%s: object named %s", ev.Key, ev.Object.Name)
		}
	}
}
