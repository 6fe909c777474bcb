package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

func testCreateGetRoundTrip(t *testing.T, e *env) {
	in := meshService(mesh, "redis")
	in.Labels["team"] = "café ☕"
	in.Status = serviceStatus("redis.svc.mesh.local")
	in.Version = 42 // ignored by create
	now := e.clock.Now()

	got := e.create(t, in)
	if got.Revision <= 0 {
		t.Fatalf("Create revision = %d, want > 0", got.Revision)
	}
	want := stored(in, 1, got.Revision, now, now)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Create returned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, e.get(t, in.Key())); diff != "" {
		t.Errorf("Get after Create (-want +got):\n%s", diff)
	}
}

// A create with DiscardObject (and its status) is written as any other;
// its result has no object, and its revision is the one a read shows.
func testCreateDiscardObject(t *testing.T, e *env) {
	in := meshService(mesh, "quiet")
	in.Status = serviceStatus("quiet.svc.mesh.local")
	r := e.applyOK(t, store.Op{Type: store.OpCreate, Object: in, DiscardObject: true})[0]
	if r.Object != nil || r.Revision <= 0 {
		t.Fatalf("DiscardObject create: result object %v, revision %d; want none, > 0", r.Object, r.Revision)
	}
	got := e.get(t, in.Key())
	if got.Revision != r.Revision {
		t.Errorf("Get after a DiscardObject create: revision %d, the create's %d", got.Revision, r.Revision)
	}
	if diff := cmp.Diff(in.Spec, got.Spec); diff != "" {
		t.Errorf("spec after a DiscardObject create (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(in.Status, got.Status); diff != "" {
		t.Errorf("status after a DiscardObject create (-want +got):\n%s", diff)
	}
}

// An OpCreate's Created is the creation time recorded, to the nanosecond,
// the modification time is the store's clock; an update keeps it.
func testCreateAtGivenTime(t *testing.T, e *env) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.UTC)
	rs, err := e.s.Apply(e.ctx, store.Op{Type: store.OpCreate, Object: meshService(mesh, "dated"), Created: at})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	got := e.get(t, resource.Key{Kind: resource.MeshService, Mesh: mesh, Name: "dated"})
	if !got.CreationTime.Equal(at) || !got.ModificationTime.Equal(e.clock.Now()) {
		t.Errorf("created %v, modified %v; want %v and the store's clock %v", got.CreationTime, got.ModificationTime, at, e.clock.Now())
	}
	got.Labels["x"] = "y"
	updated, err := store.Update(e.ctx, e.s, got)
	if err != nil {
		t.Fatal(err)
	}
	if !updated.CreationTime.Equal(at) {
		t.Errorf("an update changed the creation time to %v", updated.CreationTime)
	}
}

func testEveryKind(t *testing.T, e *env) {
	for _, d := range resource.Descriptors() {
		in := sample(d.Kind, "sample-"+strings.ToLower(string(d.Kind)))
		got := e.create(t, in)
		want := stored(in, 1, got.Revision, e.clock.Now(), e.clock.Now())
		if diff := cmp.Diff(want, e.get(t, in.Key())); diff != "" {
			t.Errorf("%s: Get after Create (-want +got):\n%s", d.Kind, diff)
		}
	}
	objs, _, err := e.s.List(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(resource.Descriptors()) {
		t.Errorf("List() returned %d objects, want one per kind (%d)", len(objs), len(resource.Descriptors()))
	}
}

func testMeshScope(t *testing.T, e *env) {
	scoped := meshService("", "no-mesh")
	if _, err := store.Create(e.ctx, e.s, scoped); err == nil || !strings.Contains(err.Error(), "mesh") {
		t.Errorf("Create(mesh-scoped without mesh) = %v, want an error about mesh", err)
	}
	global := sample(resource.Zone, "east")
	global.Mesh = mesh
	if _, err := store.Create(e.ctx, e.s, global); err == nil || !strings.Contains(err.Error(), "mesh") {
		t.Errorf("Create(global with mesh) = %v, want an error about mesh", err)
	}
	if _, err := store.Delete(e.ctx, e.s, resource.Key{Kind: resource.Zone, Mesh: mesh, Name: "east"}, 0); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete(global with mesh) = %v, want an error about mesh", err)
	}
	// The same name in two meshes is two resources; a global kind has one.
	e.create(t, meshService("a", "web"))
	e.create(t, meshService("b", "web"))
	e.create(t, sample(resource.Zone, "web"))
	objs, _, err := e.s.List(e.ctx, resource.MeshService)
	if err != nil || len(objs) != 2 {
		t.Fatalf("List(MeshService) = %d objects, %v; want 2", len(objs), err)
	}
}

func testInvalidOps(t *testing.T, e *env) {
	noName := meshService(mesh, "")
	unknown := meshService(mesh, "x")
	unknown.Kind = "Nonsense"
	wrongSpec := meshService(mesh, "wrong-spec")
	wrongSpec.Spec = &resource.ZoneSpec{}
	statusOnGlobal := sample(resource.Zone, "z")
	statusOnGlobal.Status = serviceStatus("z")
	nul := meshService(mesh, "nul\x00name")
	badUTF8 := meshService("\xff", "x")
	rs := e.apply(t,
		store.Op{Type: store.OpCreate, Object: nul},
		store.Op{Type: store.OpCreate, Object: badUTF8},
		store.Op{Type: store.OpCreate, Object: noName},
		store.Op{Type: store.OpCreate, Object: unknown},
		store.Op{Type: store.OpCreate},
		store.Op{Type: store.OpType(99), Key: meshService(mesh, "x").Key()},
		store.Op{Type: store.OpCreate, Object: wrongSpec},
		store.Op{Type: store.OpCreate, Object: statusOnGlobal},
		store.Op{Type: store.OpCreate, Object: meshService(mesh, "valid")},
	)
	for i, r := range rs[:len(rs)-1] {
		if r.Err == nil {
			t.Errorf("op %d: Err = nil, want an error", i)
		}
		if r.Object != nil || r.Revision != 0 {
			t.Errorf("op %d failed but has Object %v, Revision %d", i, r.Object, r.Revision)
		}
	}
	if last := rs[len(rs)-1]; last.Err != nil {
		t.Errorf("valid op in the same batch: %v", last.Err)
	}
	objs, _, err := e.s.List(e.ctx, "")
	if err != nil || len(objs) != 1 {
		t.Errorf("List() = %d objects, %v; want only the valid one", len(objs), err)
	}
	if _, _, err := e.s.List(e.ctx, "Nonsense"); err == nil {
		t.Error("List(unknown kind) = nil error, want one")
	}
}

func testNotFound(t *testing.T, e *env) {
	k := meshService(mesh, "ghost").Key()
	_, err := e.s.Get(e.ctx, k)
	wantErr(t, "Get", err, store.ErrNotFound)
	if !strings.Contains(err.Error(), k.String()) {
		t.Errorf("Get error %q does not name the key %s", err, k)
	}
	o := meshService(mesh, "ghost")
	o.Version = 1
	_, err = store.Update(e.ctx, e.s, o)
	wantErr(t, "Update", err, store.ErrNotFound)
	o.Status = serviceStatus("ghost")
	_, err = store.UpdateStatus(e.ctx, e.s, o)
	wantErr(t, "UpdateStatus", err, store.ErrNotFound)
	_, err = store.Delete(e.ctx, e.s, k, 0)
	wantErr(t, "Delete", err, store.ErrNotFound)

	// A tombstone is not found either.
	e.create(t, meshService(mesh, "ghost"))
	if _, err := store.Delete(e.ctx, e.s, k, 0); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.Get(e.ctx, k)
	wantErr(t, "Get after Delete", err, store.ErrNotFound)
	_, err = store.Delete(e.ctx, e.s, k, 0)
	wantErr(t, "Delete after Delete", err, store.ErrNotFound)
	_, err = store.Update(e.ctx, e.s, o)
	wantErr(t, "Update after Delete", err, store.ErrNotFound)
}

func testAlreadyExists(t *testing.T, e *env) {
	first := e.create(t, meshService(mesh, "dup"))
	again := meshService(mesh, "dup")
	again.Labels["other"] = "x"
	_, err := store.Create(e.ctx, e.s, again)
	wantErr(t, "Create twice", err, store.ErrAlreadyExists)
	if want := "create MeshService default/dup"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
	if diff := cmp.Diff(first, e.get(t, first.Key())); diff != "" {
		t.Errorf("failed Create changed the object (-want +got):\n%s", diff)
	}
}

func testRecreateAfterDelete(t *testing.T, e *env) {
	o := e.create(t, meshService(mesh, "phoenix"))
	o.Labels["v"] = "2"
	o, err := store.Update(e.ctx, e.s, o)
	if err != nil || o.Version != 2 {
		t.Fatalf("Update = version %d, %v", o.Version, err)
	}
	delRev, err := store.Delete(e.ctx, e.s, o.Key(), 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	again := e.create(t, meshService(mesh, "phoenix"))
	if again.Version != 1 {
		t.Errorf("re-created Version = %d, want 1", again.Version)
	}
	if again.Revision <= delRev {
		t.Errorf("re-created Revision = %d, want > delete revision %d", again.Revision, delRev)
	}
	if !again.CreationTime.Equal(e.clock.Now()) {
		t.Errorf("re-created CreationTime = %v, want %v", again.CreationTime, e.clock.Now())
	}
	evs := e.changes(t, 0, 0)
	if diff := cmp.Diff([]event{{store.EventPut, again.Key(), again.Revision}}, summarize(evs)); diff != "" {
		t.Errorf("Changes(0) after re-create (-want +got):\n%s", diff)
	}
}

func testStaleVersionConflicts(t *testing.T, e *env) {
	v1 := e.create(t, meshService(mesh, "redis"))
	v2 := v1.Clone()
	v2.Labels["rev"] = "2"
	v2, err := store.Update(e.ctx, e.s, v2)
	if err != nil {
		t.Fatal(err)
	}

	stale := v1.Clone()
	stale.Labels["rev"] = "stale"
	_, err = store.Update(e.ctx, e.s, stale)
	wantErr(t, "Update with stale version", err, store.ErrConflict)
	if want := "update MeshService default/redis: conflict"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
	stale.Status = serviceStatus("stale")
	_, err = store.UpdateStatus(e.ctx, e.s, stale)
	wantErr(t, "UpdateStatus with stale version", err, store.ErrConflict)
	_, err = store.Delete(e.ctx, e.s, v1.Key(), v1.Version)
	wantErr(t, "Delete with stale version", err, store.ErrConflict)
	future := v2.Clone()
	future.Version = 7
	_, err = store.Update(e.ctx, e.s, future)
	wantErr(t, "Update with a future version", err, store.ErrConflict)

	if diff := cmp.Diff(v2, e.get(t, v1.Key())); diff != "" {
		t.Errorf("failed writes changed the object (-want +got):\n%s", diff)
	}
	if _, err := store.Delete(e.ctx, e.s, v1.Key(), v2.Version); err != nil {
		t.Errorf("Delete with current version = %v", err)
	}
}

func testConcurrentUpdatesOneWinner(t *testing.T, e *env) {
	const writers = 16
	base := e.create(t, meshService(mesh, "contended"))
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			o := base.Clone()
			o.Labels["writer"] = fmt.Sprint(i)
			_, errs[i] = store.Update(e.ctx, e.s, o)
		})
	}
	wg.Wait()
	winners := 0
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("writer %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d writers won, want exactly 1", winners)
	}
	if got := e.get(t, base.Key()); got.Version != 2 {
		t.Errorf("Version = %d, want 2", got.Version)
	}
}

func testUpdateKeepsStatus(t *testing.T, e *env) {
	in := meshService(mesh, "web")
	in.Status = serviceStatus("web.mesh")
	created := e.create(t, in)
	e.clock.Advance(time.Second)

	upd := created.Clone()
	upd.Labels = map[string]string{"new": "labels"}
	upd.Spec.(*resource.MeshServiceSpec).Ports = []resource.Port{{Port: 8443, AppProtocol: resource.ProtocolHTTP2}}
	upd.Status = serviceStatus("ignored-by-update")
	got, err := store.Update(e.ctx, e.s, upd)
	if err != nil {
		t.Fatal(err)
	}
	want := stored(upd, 2, got.Revision, created.CreationTime, e.clock.Now())
	want.Status = in.Status
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Update returned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, e.get(t, in.Key())); diff != "" {
		t.Errorf("Get after Update (-want +got):\n%s", diff)
	}
}

func testUpdateStatusKeepsSpecAndLabels(t *testing.T, e *env) {
	created := e.create(t, meshService(mesh, "web"))
	e.clock.Advance(time.Second)

	upd := created.Clone()
	upd.Labels = map[string]string{"ignored": "by-update-status"}
	upd.Spec = &resource.MeshServiceSpec{}
	upd.Status = serviceStatus("web.mesh")
	got, err := store.UpdateStatus(e.ctx, e.s, upd)
	if err != nil {
		t.Fatal(err)
	}
	want := stored(created, 2, got.Revision, created.CreationTime, e.clock.Now())
	want.Status = upd.Status
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UpdateStatus returned (-want +got):\n%s", diff)
	}

	// A status computed from the old version is rejected.
	_, err = store.UpdateStatus(e.ctx, e.s, upd)
	wantErr(t, "second UpdateStatus with the same version", err, store.ErrConflict)

	// Kinds without status refuse a status.
	zone := e.create(t, sample(resource.Zone, "east"))
	zone.Status = serviceStatus("east")
	if _, err := store.UpdateStatus(e.ctx, e.s, zone); err == nil {
		t.Error("UpdateStatus(Zone) = nil error, want one: Zone has no status")
	}
}

func testRevisionsIncrease(t *testing.T, e *env) {
	var last int64
	next := func(what string, rev int64) {
		t.Helper()
		if rev <= last {
			t.Fatalf("%s: revision %d, want > %d", what, rev, last)
		}
		last = rev
	}
	a := e.create(t, meshService(mesh, "a"))
	next("create a", a.Revision)
	a, err := store.Update(e.ctx, e.s, a)
	if err != nil {
		t.Fatal(err)
	}
	next("update a", a.Revision)
	a.Status = serviceStatus("a")
	a, err = store.UpdateStatus(e.ctx, e.s, a)
	if err != nil {
		t.Fatal(err)
	}
	next("update status a", a.Revision)
	rs := e.apply(t,
		store.Op{Type: store.OpCreate, Object: meshService(mesh, "b")},
		store.Op{Type: store.OpCreate, Object: meshService(mesh, "c")},
		store.Op{Type: store.OpDelete, Key: a.Key()},
		store.Op{Type: store.OpCreate, Object: meshService(mesh, "d")},
	)
	for i, r := range rs {
		if r.Err != nil {
			t.Fatalf("batch op %d: %v", i, r.Err)
		}
		next(fmt.Sprintf("batch op %d", i), r.Revision)
	}
	_, rev, err := e.s.List(e.ctx, "")
	if err != nil || rev != last {
		t.Errorf("List revision = %d, %v; want the last write's %d", rev, err, last)
	}
}

// testConcurrentRevisionsMatchChanges writes from many goroutines at once
// (which a backend may group into shared transactions) and checks that
// every write got its own revision and that the change feed holds exactly
// those revisions, in order.
func testConcurrentRevisionsMatchChanges(t *testing.T, e *env) {
	const writers, each = 8, 25
	revs := make(chan int64, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				o, err := store.Create(e.ctx, e.s, meshService(mesh, fmt.Sprintf("w%d-%d", w, i)))
				if err != nil {
					t.Error(err)
					return
				}
				revs <- o.Revision
			}
		})
	}
	wg.Wait()
	close(revs)
	seen := map[int64]bool{}
	for r := range revs {
		if seen[r] {
			t.Fatalf("revision %d given to two writes", r)
		}
		seen[r] = true
	}
	evs := e.changes(t, 0, 0)
	if len(evs) != writers*each {
		t.Fatalf("Changes(0) = %d events, want %d", len(evs), writers*each)
	}
	for i, ev := range evs {
		if !seen[ev.Revision] {
			t.Errorf("event %d has revision %d that no write returned", i, ev.Revision)
		}
		if i > 0 && ev.Revision <= evs[i-1].Revision {
			t.Errorf("event %d revision %d after %d: not increasing", i, ev.Revision, evs[i-1].Revision)
		}
	}
}

func testBatchFailedOpDoesNotAffectOthers(t *testing.T, e *env) {
	existing := e.create(t, meshService(mesh, "existing"))
	stale := existing.Clone()
	stale.Version = 99
	stale.Labels["stale"] = "yes"
	rs := e.apply(t,
		store.Op{Type: store.OpCreate, Object: meshService(mesh, "first")},
		store.Op{Type: store.OpCreate, Object: meshService(mesh, "existing")},
		store.Op{Type: store.OpUpdate, Object: stale},
		store.Op{Type: store.OpDelete, Key: meshService(mesh, "missing").Key()},
		store.Op{Type: store.OpCreate, Object: meshService(mesh, "last")},
	)
	wantErrs := []error{nil, store.ErrAlreadyExists, store.ErrConflict, store.ErrNotFound, nil}
	for i, want := range wantErrs {
		if want == nil {
			if rs[i].Err != nil || rs[i].Object == nil {
				t.Errorf("op %d: %v, want success", i, rs[i].Err)
			}
			continue
		}
		if !errors.Is(rs[i].Err, want) {
			t.Errorf("op %d: %v, want %v", i, rs[i].Err, want)
		}
		if rs[i].Object != nil || rs[i].Revision != 0 {
			t.Errorf("op %d failed but has Object %v, Revision %d", i, rs[i].Object, rs[i].Revision)
		}
	}
	if rs[4].Revision != rs[0].Revision+1 {
		t.Errorf("revisions %d and %d: failed ops must not use revisions", rs[0].Revision, rs[4].Revision)
	}
	if diff := cmp.Diff(existing, e.get(t, existing.Key())); diff != "" {
		t.Errorf("failed ops changed the object (-want +got):\n%s", diff)
	}
	e.get(t, meshService(mesh, "first").Key())
	e.get(t, meshService(mesh, "last").Key())
}

func testEmptyBatch(t *testing.T, e *env) {
	rs, err := e.s.Apply(e.ctx)
	if err != nil || len(rs) != 0 {
		t.Errorf("Apply() = %v, %v; want no results, no error", rs, err)
	}
}

func testCanceledContextWritesNothing(t *testing.T, e *env) {
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err := e.s.Apply(ctx, store.Op{Type: store.OpCreate, Object: meshService(mesh, "never")})
	wantErr(t, "Apply(canceled)", err, context.Canceled)
	if evs := e.changes(t, 0, 0); len(evs) != 0 {
		t.Errorf("Changes after a canceled Apply = %v, want none", summarize(evs))
	}
}
