package backend

import (
	"fmt"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
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
	if _, ok := r.Changes(first-2, 10); ok {
		t.Errorf("Changes(%d) served, but revision %d is no longer held", first-2, first-1)
	}
	evs, ok := r.Changes(first-1, 0)
	if !ok || len(evs) != 100 || evs[len(evs)-1].Revision != n {
		t.Fatalf("Changes(%d) = %d events, ok %v; want the last write of each of the 100 keys", first-1, len(evs), ok)
	}
	if obj := r.ObjectBefore(resource.Key{Kind: resource.MeshService, Mesh: "m", Name: fmt.Sprint(n % 100)}); obj == nil || obj.Revision != n {
		t.Errorf("ObjectBefore of the last key = %v", obj)
	}
}
