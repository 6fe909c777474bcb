package zonesync

import (
	"context"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// A Zone's change sends its services again to a stream only when it can
// change where they go: not for the creation of an enabled Zone (a zone
// connecting for the first time), which leaves them where they were.
func TestGlobalSide_RelatedWhenAZoneChangesItsServicesFate(t *testing.T) {
	p := newCP(t, "global")
	for _, name := range []string{"a", "b", "c"} {
		p.put(meshService("default", name, 80), resource.ModeZone, "east")
	}
	p.put(meshService("default", "other", 80), resource.ModeZone, "north")
	g := newGlobalSide("west", p.c, resource.ExportAll, nil)
	ctx := context.Background()
	zoneKey := resource.Key{Kind: resource.Zone, Name: "east"}
	putZone := func(enabled *bool) *resource.Object {
		t.Helper()
		return p.put(&resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{Enabled: enabled}}, resource.ModeGlobal, "")
	}
	related := func(typ store.EventType, rev int64) int {
		t.Helper()
		return len(g.related(ctx, store.Event{Type: typ, Revision: rev, Key: zoneKey}))
	}
	no, yes := false, true

	created := putZone(nil)
	if n := related(store.EventPut, created.Revision); n != 0 {
		t.Errorf("creation of an enabled Zone: %d services again, want none", n)
	}
	disabled := putZone(&no)
	if n := related(store.EventPut, disabled.Revision); n != 3 {
		t.Errorf("Zone disabled: %d services again, want east's 3", n)
	}
	// A stream behind the feed meets the creation once the Zone changed
	// since: it cannot tell what the creation left, and sends them.
	if n := related(store.EventPut, created.Revision); n != 3 {
		t.Errorf("creation read after a later change: %d services again, want 3", n)
	}
	enabled := putZone(&yes)
	if n := related(store.EventPut, enabled.Revision); n != 3 {
		t.Errorf("Zone enabled again: %d services again, want 3", n)
	}
	p.delete(zoneKey)
	_, deletedAt, err := p.st.List(ctx, resource.Zone)
	if err != nil {
		t.Fatal(err)
	}
	if n := related(store.EventDelete, deletedAt); n != 3 {
		t.Errorf("Zone deleted: %d services again, want 3", n)
	}
	recreated := putZone(&no)
	if recreated.Version != 1 {
		t.Fatalf("recreated Zone at version %d", recreated.Version)
	}
	if n := related(store.EventPut, recreated.Revision); n != 3 {
		t.Errorf("creation of a disabled Zone: %d services again, want 3", n)
	}
	if n := len(g.related(ctx, store.Event{Type: store.EventPut, Revision: recreated.Revision,
		Key: resource.Key{Kind: resource.Zone, Name: "west"}})); n != 0 {
		t.Errorf("the stream's own Zone: %d services, want none", n)
	}
}
