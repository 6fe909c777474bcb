package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// testPatchStatus has two controllers patch one status from the same old
// copy, each its own parts: neither conflicts, each part ends as its owner
// wrote it, the other parts and conditions are kept, and each patch bumps
// the version and revision like any write.
func testPatchStatus(t *testing.T, e *env) {
	svc := e.create(t, meshService(mesh, "patched"))
	// A starting status: a hostname, a VIP and a condition of each owner.
	start := svc.Clone()
	start.Status = &resource.ServiceStatus{
		Addresses:  []resource.Address{{Hostname: "old.mesh", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "g"}}},
		VIPs:       []resource.VIP{{IP: "241.0.0.1", Type: resource.VIPKuma}},
		Conditions: []resource.Condition{{Type: "VIPsAllocated", Status: "False"}, {Type: "PortsConsistent", Status: "False"}},
	}
	start = e.applyOK(t, store.Op{Type: store.OpUpdateStatus, Object: start})[0].Object

	// Both writers start from the same copy (version v).
	names := start.Clone()
	names.Status.(*resource.ServiceStatus).Addresses = []resource.Address{{Hostname: "new.mesh", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "g"}}}
	addrs := start.Clone()
	addrs.Status.(*resource.ServiceStatus).VIPs = []resource.VIP{{IP: "241.0.0.2", Type: resource.VIPKuma}}
	addrs.Status.(*resource.ServiceStatus).Conditions = nil // VIPsAllocated cleared
	r1 := e.applyOK(t, store.Op{Type: store.OpPatchStatus, Object: names, Patch: &store.StatusPatch{Fields: []string{"addresses"}}})[0]
	// DiscardObject: the write happens, its result carries no object.
	quiet := e.applyOK(t, store.Op{Type: store.OpPatchStatus, Object: names, Patch: &store.StatusPatch{Fields: []string{"addresses"}}, DiscardObject: true})[0]
	if quiet.Object != nil || quiet.Revision <= r1.Revision {
		t.Errorf("DiscardObject: result object %v, revision %d after %d", quiet.Object, quiet.Revision, r1.Revision)
	}
	afterR1 := e.get(t, svc.Key())
	r2 := e.applyOK(t, store.Op{Type: store.OpPatchStatus, Object: addrs, Patch: &store.StatusPatch{Fields: []string{"vips"}, Conditions: []string{"VIPsAllocated"}}})[0]
	if r1.Object.Version != start.Version+1 || afterR1.Version != start.Version+2 || r2.Object.Version != start.Version+3 || r2.Revision <= quiet.Revision {
		t.Errorf("versions %d, %d, %d after %d; revisions %d, %d", r1.Object.Version, afterR1.Version, r2.Object.Version, start.Version, quiet.Revision, r2.Revision)
	}
	got := e.get(t, svc.Key())
	want := &resource.ServiceStatus{
		Addresses:  names.Status.(*resource.ServiceStatus).Addresses,
		VIPs:       addrs.Status.(*resource.ServiceStatus).VIPs,
		Conditions: []resource.Condition{{Type: "PortsConsistent", Status: "False"}},
	}
	if d := cmp.Diff(want, got.Status); d != "" {
		t.Errorf("status after two patches (-want +got):\n%s", d)
	}
	if d := cmp.Diff(svc.Spec, got.Spec); d != "" || got.Labels["app"] != "patched" {
		t.Errorf("a patch changed labels or spec: %s", d)
	}

	// Conditions of the patched types are replaced, in the patch's order,
	// after the others; a field absent from the patch's status goes.
	third := got.Clone()
	st := third.Status.(*resource.ServiceStatus)
	st.Conditions = []resource.Condition{{Type: "PortsConsistent", Status: "False", Reason: "B"}, {Type: "ExportModeConsistent", Status: "False"}, {Type: "Stranger", Status: "True"}}
	st.Addresses = nil
	e.applyOK(t, store.Op{Type: store.OpPatchStatus, Object: third, Patch: &store.StatusPatch{Fields: []string{"addresses"}, Conditions: []string{"PortsConsistent", "ExportModeConsistent"}}})
	got = e.get(t, svc.Key())
	want = &resource.ServiceStatus{
		VIPs:       addrs.Status.(*resource.ServiceStatus).VIPs,
		Conditions: []resource.Condition{{Type: "PortsConsistent", Status: "False", Reason: "B"}, {Type: "ExportModeConsistent", Status: "False"}},
	}
	if d := cmp.Diff(want, got.Status); d != "" {
		t.Errorf("status after the third patch (-want +got):\n%s", d)
	}

	// A patch of a resource that does not exist, or without a patch.
	gone := meshService(mesh, "never-created")
	gone.Status = serviceStatus("x.mesh")
	rs := e.apply(t, store.Op{Type: store.OpPatchStatus, Object: gone, Patch: &store.StatusPatch{Fields: []string{"addresses"}}})
	if !errors.Is(rs[0].Err, store.ErrNotFound) {
		t.Errorf("patch of a missing resource: %v, want ErrNotFound", rs[0].Err)
	}
	if rs := e.apply(t, store.Op{Type: store.OpPatchStatus, Object: got}); rs[0].Err == nil {
		t.Error("a patch without Patch was accepted")
	}
}

// testPreviousRevision: a write's result names the revision of the live
// resource it replaced, 0 for a create (also after a deletion).
func testPreviousRevision(t *testing.T, e *env) {
	created := e.applyOK(t, store.Op{Type: store.OpCreate, Object: meshService(mesh, "prev")})[0]
	if created.Previous != 0 {
		t.Errorf("create: Previous %d, want 0", created.Previous)
	}
	upd := created.Object.Clone()
	upd.Labels = map[string]string{"team": "a"}
	updated := e.applyOK(t, store.Op{Type: store.OpUpdate, Object: upd})[0]
	st := updated.Object.Clone()
	st.Status = serviceStatus("prev.mesh")
	patched := e.applyOK(t, store.Op{Type: store.OpPatchStatus, Object: st, Patch: &store.StatusPatch{Fields: []string{"addresses"}}, DiscardObject: true})[0]
	deleted := e.applyOK(t, store.Op{Type: store.OpDelete, Key: created.Object.Key()})[0]
	again := e.applyOK(t, store.Op{Type: store.OpCreate, Object: meshService(mesh, "prev")})[0]
	for _, c := range []struct {
		what      string
		got, want int64
	}{
		{"update", updated.Previous, created.Revision},
		{"status patch", patched.Previous, updated.Revision},
		{"delete", deleted.Previous, patched.Revision},
		{"create after delete", again.Previous, 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: Previous %d, want %d", c.what, c.got, c.want)
		}
	}
}

// testPatchStatusBase: a status patch says which object it was decided
// over (Op.Base); the change feed shows what is stored whether Base is
// that object or an older one (a user's update came in between), and
// sharing Base's labels and spec never leaks into what is stored. Run
// after a reopen too, where the store remembers no recent write.
func testPatchStatusBase(t *testing.T, e *env) {
	for _, reopened := range []bool{false, true} {
		name := "base"
		if reopened {
			name = "base-reopened"
		}
		old := e.create(t, meshService(mesh, name))
		upd := old.Clone()
		upd.Labels["team"] = "b"
		e.applyOK(t, store.Op{Type: store.OpUpdate, Object: upd})
		if reopened {
			if err := e.s.Close(); err != nil {
				t.Fatal(err)
			}
			e.s = e.reopen()
		}
		// feedShowsStored checks the feed's event of the write that made
		// revision rev against what Get returns.
		feedShowsStored := func(what string, rev int64) {
			t.Helper()
			stored := e.get(t, old.Key())
			evs := e.changes(t, rev-1, 100)
			if len(evs) != 1 || evs[0].Revision != rev || stored.Revision != rev {
				t.Fatalf("%s, %s: feed after %d: %v, stored revision %d", name, what, rev-1, summarize(evs), stored.Revision)
			}
			if d := cmp.Diff(stored, evs[0].Object); d != "" {
				t.Errorf("%s, %s: feed event (-stored +event):\n%s", name, what, d)
			}
		}
		// patch writes a status naming host, decided over `over`, with a
		// copy of it as Base, which it returns.
		patch := func(what string, over *resource.Object, host string) *resource.Object {
			t.Helper()
			next, base := over.Clone(), over.Clone()
			next.Status = serviceStatus(host)
			r := e.applyOK(t, store.Op{Type: store.OpPatchStatus, Object: next, Base: base, Patch: &store.StatusPatch{Fields: []string{"addresses"}}, DiscardObject: true})[0]
			feedShowsStored(what, r.Revision)
			return base
		}
		// Decided over the old object: the stored labels (team b) stay.
		staleBase := patch("stale base", old, "stale.mesh")
		// Decided over the stored object.
		cur := e.get(t, old.Key())
		base := patch("current base", cur, "current.mesh")
		stored := e.get(t, old.Key())
		if stored.Labels["team"] != "b" || stored.Status.(*resource.ServiceStatus).Addresses[0].Hostname != "current.mesh" {
			t.Errorf("%s: stored labels %v, status %+v", name, stored.Labels, stored.Status)
		}
		// The store did not modify what it was given.
		if d := cmp.Diff(old, staleBase); d != "" {
			t.Errorf("%s: the stale Base was modified:\n%s", name, d)
		}
		if d := cmp.Diff(cur, base); d != "" {
			t.Errorf("%s: the Base was modified:\n%s", name, d)
		}
	}
}
