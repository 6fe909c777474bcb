package zonesync

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// zoneCopy stores on p the global's copy of zone's MeshService local
// (namespace ns, "" for none), as acceptFromZone names and labels it.
func zoneCopy(t *testing.T, p *cp, zone, local, ns string) resource.Key {
	t.Helper()
	ms := meshService("default", HashedName(resource.MeshService, "default", local, zone, ns), 80)
	ms.Labels = map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: zone, resource.LabelDisplayName: local}
	if ns != "" {
		ms.Labels[resource.LabelNamespace] = ns
	}
	obj, err := store.Create(context.Background(), p.st, ms)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.c.WaitFor(context.Background(), obj.Revision); err != nil {
		t.Fatal(err)
	}
	return ms.Key()
}

// TestDeletions_Resolve: the global finds its copy of what a zone
// deleted by the hashed name, the Kubernetes object's name and namespace,
// or the display name (a namespace label the name does not show), never
// another zone's; and one batch reads the zone's display names once, how
// many of its deletions find nothing by name (a zone resuming from an old
// position sends again thousands it applied already: each read them all
// under the cache's lock, minutes for one batch at 20,000 services).
func TestDeletions_Resolve(t *testing.T) {
	p := newCP(t, "global")
	a := zoneCopy(t, p, "east", "a", "")
	web := zoneCopy(t, p, "east", "web", "shop")
	odd := zoneCopy(t, p, "east", "odd", "x")
	zoneCopy(t, p, "west", "gone", "")
	for i := range 50 {
		zoneCopy(t, p, "east", fmt.Sprintf("more-%d", i), "")
	}
	g := newGlobalSide("east", p.c, resource.ExportAll, &inventories{})
	d := &deletions{g: g, byDisplay: map[group]map[string][]nsKey{}}
	for _, tc := range []struct {
		deleted resource.Key
		want    []resource.Key
	}{
		{msKey("default", "a"), []resource.Key{a}},
		{msKey("default", "web.shop"), []resource.Key{web}},
		{msKey("default", "gone"), nil}, // west's has that name
		{msKey("default", "odd"), []resource.Key{odd}},
		{msKey("default", "gone-too"), nil},
		{msKey("other", "a"), nil},
		{resource.Key{Kind: resource.Mesh, Name: "default"}, nil},
	} {
		if diff := cmp.Diff(tc.want, d.resolve(tc.deleted)); diff != "" {
			t.Errorf("resolve(%s) (-want +got):\n%s", tc.deleted, diff)
		}
	}
	if d.reads != 2 {
		t.Errorf("the batch read the zone's display names %d times, want once for each of the two meshes asked", d.reads)
	}
}
