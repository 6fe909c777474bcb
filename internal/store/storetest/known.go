package storetest

import (
	"context"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// KnownFeed checks s's store.KnownFeed: after clear (which makes s read
// its feed from the database, as a reader behind its memory does), the
// feed asks known about every put at its revision, takes the puts known
// has from it (without an object, or with known's very object) and is
// otherwise Changes: the same events, revisions and objects, deletions
// included.
func KnownFeed(t *testing.T, s store.Store, clear func()) {
	t.Helper()
	kf, ok := s.(store.KnownFeed)
	if !ok {
		t.Fatalf("%T is not a store.KnownFeed", s)
	}
	ctx := context.Background()
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
	clear()
	all, err := s.Changes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	revs := map[resource.Key]int64{}
	for _, ev := range all {
		revs[ev.Key] = ev.Revision
	}
	b := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "b"}
	c := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "c"}
	mine := &resource.Object{Kind: c.Kind, Mesh: c.Mesh, Name: c.Name, Revision: revs[c]}
	asked := map[resource.Key]bool{}
	got, err := kf.ChangesKnown(ctx, 0, 0, func(k resource.Key, rev int64) (*resource.Object, bool) {
		asked[k] = true
		if rev != revs[k] {
			t.Errorf("known asked about %s at revision %d, the feed has %d", k, rev, revs[k])
		}
		switch k {
		case b:
			return nil, true
		case c:
			return mine, true
		}
		return nil, false
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Fatalf("%d events; Changes has %d", len(got), len(all))
	}
	for i, ev := range got {
		want := all[i]
		if ev.Key != want.Key || ev.Revision != want.Revision || ev.Type != want.Type {
			t.Errorf("event %d: %s %v at %d, Changes has %s %v at %d", i, ev.Key, ev.Type, ev.Revision, want.Key, want.Type, want.Revision)
		}
		if want.Type == store.EventPut && !asked[ev.Key] {
			t.Errorf("known was not asked about the put of %s", ev.Key)
		}
		switch {
		case ev.Key == b && ev.Object != nil:
			t.Errorf("%s was known to be of no use, but read", b)
		case ev.Key == c && ev.Object != mine:
			t.Errorf("%s: %v, want known's object", c, ev.Object)
		case ev.Key == b || ev.Key == c:
		case (ev.Object == nil) != (want.Object == nil):
			t.Errorf("%s: object %v, Changes has %v", ev.Key, ev.Object, want.Object)
		case ev.Object != nil && ev.Object.Name != want.Object.Name:
			t.Errorf("%s: object named %s", ev.Key, ev.Object.Name)
		}
	}
}
