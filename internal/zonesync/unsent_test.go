package zonesync

import (
	"context"
	"testing"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// TestZoneSide_Unsent pins which writes a zone's sender may leave unread:
// only a put the cache holds at that very revision, of a kind that does not
// flow to global or of a resource that came from global.
func TestZoneSide_Unsent(t *testing.T) {
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
		want bool
	}{
		{"a Mesh does not flow to global", mesh.Key(), mesh.Revision, true},
		{"a service from global", synced.Key(), synced.Revision, true},
		{"the zone's own service", own.Key(), own.Revision, false},
		{"a service from global at a revision the cache does not hold", synced.Key(), synced.Revision - 1, false},
		{"a key the cache does not hold (deleted)", missing, synced.Revision, false},
	} {
		if got := z.unsent(tc.k, tc.rev); got != tc.want {
			t.Errorf("%s: unsent(%s, %d) = %v, want %v", tc.what, tc.k, tc.rev, got, tc.want)
		}
	}
}
