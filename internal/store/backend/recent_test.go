package backend

import (
	"fmt"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// TestRecent_KeepsAWindow adds more events than RecentCap, one commit at a
// time, and checks that the window kept is contiguous, ends at the last
// event, holds at least RecentCap events and at most a quarter more, and
// serves exactly the readers inside it.
func TestRecent_KeepsAWindow(t *testing.T) {
	var r Recent
	const n = 3 * RecentCap
	for rev := int64(1); rev <= n; rev++ {
		key := resource.Key{Kind: resource.MeshService, Mesh: "m", Name: fmt.Sprint(rev % 100)}
		r.Add([]RecentEvent{{Rev: rev, Key: key, Obj: &resource.Object{Kind: key.Kind, Mesh: key.Mesh, Name: key.Name, Revision: rev}}})
		first, last := r.First(), r.Last()
		if held := last - first + 1; last != rev || held < min(rev, RecentCap) || held > RecentCap+RecentCap/4 {
			t.Fatalf("after revision %d: holds %d to %d", rev, first, last)
		}
	}
	first := r.First()
	if _, ok := r.Changes(first-2, 10, nil); ok {
		t.Errorf("Changes(%d) served, but revision %d is no longer held", first-2, first-1)
	}
	evs, ok := r.Changes(first-1, 0, nil)
	if !ok || len(evs) != 100 || evs[len(evs)-1].Revision != n {
		t.Fatalf("Changes(%d) = %d events, ok %v; want the last write of each of the 100 keys", first-1, len(evs), ok)
	}
	if obj := r.ObjectBefore(resource.Key{Kind: resource.MeshService, Mesh: "m", Name: fmt.Sprint(n % 100)}); obj == nil || obj.Revision != n {
		t.Errorf("ObjectBefore of the last key = %v", obj)
	}
}

// TestRecent_Known checks that rows the reader knows (store.Known) come as
// the reader's objects, neither decoded nor kept, and that the rest are
// decoded and kept for the readers that follow.
func TestRecent_Known(t *testing.T) {
	var r Recent
	rows := serviceRows(3)
	for _, row := range rows {
		r.Add([]RecentEvent{{Rev: row.Revision, Key: row.Key, Row: row}})
	}
	mine := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "s1", Revision: 2}
	var asked []int64
	evs, ok := r.Changes(0, 0, func(k resource.Key, rev int64) (*resource.Object, bool) {
		asked = append(asked, rev)
		switch k.Name {
		case "s0":
			return nil, true // of no use to the reader
		case "s1":
			return mine, true
		}
		return nil, false
	})
	if !ok || len(evs) != 3 {
		t.Fatalf("Changes = %d events, ok %v", len(evs), ok)
	}
	if len(asked) != 3 {
		t.Errorf("known asked about revisions %v, want all three", asked)
	}
	if evs[0].Type != store.EventPut || evs[0].Object != nil {
		t.Errorf("s0: %v %v, want a put without its object", evs[0].Type, evs[0].Object)
	}
	if evs[1].Object != mine {
		t.Errorf("s1: %v, want the reader's object", evs[1].Object)
	}
	if evs[2].Object == nil || evs[2].Object.Labels["i"] != "2" {
		t.Errorf("s2: %v, want the decoded row", evs[2].Object)
	}
	// The next reader knows nothing: s2 comes as decoded before, the
	// others are decoded now (the reader's objects were not kept).
	again, ok := r.Changes(0, 0, nil)
	if !ok || len(again) != 3 {
		t.Fatalf("Changes = %d events, ok %v", len(again), ok)
	}
	if again[2].Object != evs[2].Object {
		t.Errorf("s2 was decoded again")
	}
	for i, ev := range again[:2] {
		if ev.Object == nil || ev.Object == mine || ev.Object.Labels["i"] != fmt.Sprint(i) {
			t.Errorf("s%d: %v, want its decoded row", i, ev.Object)
		}
	}
}
