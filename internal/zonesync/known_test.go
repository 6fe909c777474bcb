package zonesync

import (
	"context"
	"testing"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// TestZoneSide_Known pins which writes a zone's sender may leave unread:
// only a put the cache holds at that very revision; of a kind that does not
// flow to global or of a resource that came from global it needs nothing,
// of its own resources the cache's object.
func TestZoneSide_Known(t *testing.T) {
	p := newCP(t, "east")
	ctx := context.Background()
	// What zone sync stores for the global (as the receiver does, past
	// admission of users' writes).
	fromGlobal := func(obj *resource.Object) *resource.Object {
		t.Helper()
		obj.Labels = map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelZone: "west", resource.LabelDisplayName: obj.Name}
		o, err := store.Create(ctx, p.st, obj)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	mesh := fromGlobal(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}})
	own := p.put(meshService("default", "own", 80), config.ModeZone, "east")
	synced := fromGlobal(meshService("default", "redis-0123456789", 80))
	if err := p.c.WaitFor(ctx, synced.Revision); err != nil {
		t.Fatal(err)
	}
	z := &zoneSide{zone: "east", cache: p.c}
	missing := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "missing"}
	for _, tc := range []struct {
		what string
		k    resource.Key
		rev  int64
		ok   bool
		obj  *resource.Object // what comes with ok
	}{
		{"a Mesh does not flow to global", mesh.Key(), mesh.Revision, true, nil},
		{"a service from global", synced.Key(), synced.Revision, true, nil},
		{"the zone's own service", own.Key(), own.Revision, true, own},
		{"the zone's own service at a revision the cache does not hold", own.Key(), own.Revision - 1, false, nil},
		{"a service from global at a revision the cache does not hold", synced.Key(), synced.Revision - 1, false, nil},
		{"a key the cache does not hold (deleted)", missing, synced.Revision, false, nil},
	} {
		obj, ok := z.known(tc.k, tc.rev)
		if ok != tc.ok {
			t.Errorf("%s: known(%s, %d) reports %v, want %v", tc.what, tc.k, tc.rev, ok, tc.ok)
			continue
		}
		switch {
		case tc.obj == nil && obj != nil:
			t.Errorf("%s: known(%s, %d) = %s, want no object", tc.what, tc.k, tc.rev, obj.Key())
		case tc.obj != nil && (obj == nil || obj.Key() != tc.obj.Key() || obj.Revision != tc.obj.Revision):
			t.Errorf("%s: known(%s, %d) = %v, want %s at %d", tc.what, tc.k, tc.rev, obj, tc.obj.Key(), tc.obj.Revision)
		}
	}
}
