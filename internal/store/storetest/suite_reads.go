package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

func testList(t *testing.T, e *env) {
	// Created out of order, listed by kind, mesh, name (bytewise).
	for _, o := range []*resource.Object{
		meshService("mesh-b", "a"),
		meshService("mesh-a", "b"),
		meshService("mesh-a", "a"),
		meshService("mesh-a", "Z"),
		sample(resource.Zone, "west"),
		sample(resource.Zone, "east"),
		meshService("mesh-a", "gone"),
	} {
		e.create(t, o)
	}
	if _, err := store.Delete(e.ctx, e.s, meshService("mesh-a", "gone").Key(), 0); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	last := e.create(t, sample(resource.Mesh, "mesh-a"))

	keys := func(objs []*resource.Object) []string {
		var ks []string
		for _, o := range objs {
			ks = append(ks, o.Key().String())
		}
		return ks
	}
	objs, rev, err := e.s.List(e.ctx, resource.MeshService)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"MeshService mesh-a/Z", "MeshService mesh-a/a", "MeshService mesh-a/b", "MeshService mesh-b/a"}
	if diff := cmp.Diff(want, keys(objs)); diff != "" {
		t.Errorf("List(MeshService) (-want +got):\n%s", diff)
	}
	if rev != last.Revision {
		t.Errorf("List(MeshService) revision = %d, want %d", rev, last.Revision)
	}
	objs, rev, err = e.s.List(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want = append([]string{"Mesh mesh-a"}, append(want, "Zone east", "Zone west")...)
	if diff := cmp.Diff(want, keys(objs)); diff != "" {
		t.Errorf("List() (-want +got):\n%s", diff)
	}
	if rev != last.Revision {
		t.Errorf("List() revision = %d, want %d", rev, last.Revision)
	}
	if diff := cmp.Diff(last, objs[0]); diff != "" {
		t.Errorf("List() object (-want +got):\n%s", diff)
	}
	objs, _, err = e.s.List(e.ctx, resource.Dataplane)
	if err != nil || len(objs) != 0 {
		t.Errorf("List(Dataplane) = %v, %v; want none", keys(objs), err)
	}
}

func testChangesOrderAndResume(t *testing.T, e *env) {
	if evs := e.changes(t, 0, 0); len(evs) != 0 {
		t.Fatalf("Changes on an empty store = %v", summarize(evs))
	}
	a := e.create(t, meshService(mesh, "a"))
	b := e.create(t, meshService(mesh, "b"))
	a.Labels["v"] = "2"
	a, err := store.Update(e.ctx, e.s, a)
	if err != nil {
		t.Fatal(err)
	}
	delB, err := store.Delete(e.ctx, e.s, b.Key(), 0)
	if err != nil {
		t.Fatal(err)
	}
	c := e.create(t, sample(resource.Zone, "c"))

	evs := e.changes(t, 0, 0)
	want := []event{
		{store.EventPut, a.Key(), a.Revision},
		{store.EventDelete, b.Key(), delB},
		{store.EventPut, c.Key(), c.Revision},
	}
	if diff := cmp.Diff(want, summarize(evs)); diff != "" {
		t.Errorf("Changes(0) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(a, evs[0].Object); diff != "" {
		t.Errorf("Put event object (-want +got):\n%s", diff)
	}
	if evs[1].Object != nil {
		t.Errorf("Delete event has object %v", evs[1].Object)
	}
	if diff := cmp.Diff(want[1:], summarize(e.changes(t, a.Revision, 0))); diff != "" {
		t.Errorf("Changes(%d) (-want +got):\n%s", a.Revision, diff)
	}
	if diff := cmp.Diff(want[2:], summarize(e.changes(t, delB, 0))); diff != "" {
		t.Errorf("Changes(%d) (-want +got):\n%s", delB, diff)
	}
	if evs := e.changes(t, c.Revision, 0); len(evs) != 0 {
		t.Errorf("Changes(last) = %v, want none", summarize(evs))
	}
	if evs := e.changes(t, c.Revision+100, 0); len(evs) != 0 {
		t.Errorf("Changes(future) = %v, want none", summarize(evs))
	}
}

func testChangesPaging(t *testing.T, e *env) {
	const n, page = 25, 10
	var ops []store.Op
	for i := range n {
		ops = append(ops, store.Op{Type: store.OpCreate, Object: meshService(mesh, fmt.Sprintf("svc-%02d", i))})
	}
	var want []event
	for _, r := range e.apply(t, ops...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		want = append(want, event{store.EventPut, r.Object.Key(), r.Revision})
	}
	var got []event
	var after int64
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("paging does not end")
		}
		evs := e.changes(t, after, page)
		if len(evs) > page {
			t.Fatalf("Changes(%d, %d) returned %d events", after, page, len(evs))
		}
		if len(evs) == 0 {
			break
		}
		got = append(got, summarize(evs)...)
		after = evs[len(evs)-1].Revision
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged Changes (-want +got):\n%s", diff)
	}
}

func testCompaction(t *testing.T, e *env) {
	c, ok := e.s.(store.Compacter)
	if !ok {
		t.Fatalf("%T has no Compact method", e.s)
	}
	const retention = time.Hour
	old := e.create(t, meshService(mesh, "old"))
	oldDel, err := store.Delete(e.ctx, e.s, old.Key(), 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * retention)
	live := e.create(t, meshService(mesh, "live"))
	recent := e.create(t, meshService(mesh, "recent"))
	recentDel, err := store.Delete(e.ctx, e.s, recent.Key(), 0)
	if err != nil {
		t.Fatal(err)
	}

	n, err := c.Compact(e.ctx, retention)
	if err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v; want 1 tombstone dropped", n, err)
	}
	for _, after := range []int64{0, oldDel - 1} {
		_, err = e.s.Changes(e.ctx, after, 0)
		wantErr(t, fmt.Sprintf("Changes(%d) after compaction", after), err, store.ErrCompacted)
	}
	want := []event{{store.EventPut, live.Key(), live.Revision}, {store.EventDelete, recent.Key(), recentDel}}
	if diff := cmp.Diff(want, summarize(e.changes(t, oldDel, 0))); diff != "" {
		t.Errorf("Changes(%d) after compaction (-want +got):\n%s", oldDel, diff)
	}
	if n, err := c.Compact(e.ctx, retention); err != nil || n != 0 {
		t.Errorf("second Compact = %d, %v; want 0", n, err)
	}
	// Re-creating a compacted key works as a fresh create.
	if again := e.create(t, meshService(mesh, "old")); again.Version != 1 {
		t.Errorf("re-created Version = %d, want 1", again.Version)
	}
}

func testChangedWakesWaiter(t *testing.T, e *env) {
	ch := e.s.Changed()
	select {
	case <-ch:
		t.Fatal("Changed() closed before any write")
	default:
	}
	woke := make(chan struct{})
	go func() {
		<-ch
		close(woke)
	}()
	e.create(t, meshService(mesh, "wake"))
	select {
	case <-woke:
	case <-time.After(waitTimeout):
		t.Fatal("Changed() not closed after a write")
	}
	// A channel taken after the write waits for the next one.
	ch = e.s.Changed()
	if _, err := store.Delete(e.ctx, e.s, meshService(mesh, "wake").Key(), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatal("Changed() not closed after a delete")
	}
}
