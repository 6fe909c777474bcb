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

// Run runs the conformance suite against the stores open returns.
func Run(t *testing.T, open Opener) { RunExcept(t, open, nil) }

// RunExcept runs the suite but the subtests named in skip, which are
// skipped with the reason given: for a backend whose documented semantics
// differ there (the Kubernetes store).
func RunExcept(t *testing.T, open Opener, skip map[string]string) {
	tests := []struct {
		name string
		f    func(t *testing.T, e *env)
	}{
		{"CreateGetRoundTrip", testCreateGetRoundTrip},
		{"CreateAtGivenTime", testCreateAtGivenTime},
		{"EveryKind", testEveryKind},
		{"MeshScope", testMeshScope},
		{"InvalidOps", testInvalidOps},
		{"NotFound", testNotFound},
		{"AlreadyExists", testAlreadyExists},
		{"RecreateAfterDelete", testRecreateAfterDelete},
		{"StaleVersionConflicts", testStaleVersionConflicts},
		{"ConcurrentUpdatesOneWinner", testConcurrentUpdatesOneWinner},
		{"UpdateKeepsStatus", testUpdateKeepsStatus},
		{"UpdateStatusKeepsSpecAndLabels", testUpdateStatusKeepsSpecAndLabels},
		{"PreviousRevision", testPreviousRevision},
		{"RevisionsIncrease", testRevisionsIncrease},
		{"ConcurrentRevisionsMatchChanges", testConcurrentRevisionsMatchChanges},
		{"BatchFailedOpDoesNotAffectOthers", testBatchFailedOpDoesNotAffectOthers},
		{"EmptyBatch", testEmptyBatch},
		{"CanceledContextWritesNothing", testCanceledContextWritesNothing},
		{"List", testList},
		{"ChangesOrderAndResume", testChangesOrderAndResume},
		{"ChangesPaging", testChangesPaging},
		{"Compaction", testCompaction},
		{"ChangedWakesWaiter", testChangedWakesWaiter},
		{"TooLarge", testTooLarge},
		{"UnicodeAndMaximumLengthNames", testUnicodeAndMaximumLengthNames},
		{"ReturnsCopies", testReturnsCopies},
		{"UseAfterClose", testUseAfterClose},
		{"SurvivesReopen", testSurvivesReopen},
		{"LeaseRoundTrip", testLeaseRoundTrip},
		{"LeaseReplaceAndDelete", testLeaseReplaceAndDelete},
		{"LeasePrefix", testLeasePrefix},
		{"LeasesWithStatusInOneApply", testLeasesWithStatusInOneApply},
		{"LeaseAndResourceFailuresIndependent", testLeaseAndResourceFailuresIndependent},
		{"LeasesOutsideChangeFeed", testLeasesOutsideChangeFeed},
		{"InvalidLeases", testInvalidLeases},
		{"ConcurrentLeaseWrites", testConcurrentLeaseWrites},
		{"LeasesSurviveReopen", testLeasesSurviveReopen},
		{"CreateLease", testCreateLease},
		{"RecordsAppendAndQuery", testRecordsAppendAndQuery},
		{"RecordsDependOnTheirWrite", testRecordsDependOnTheirWrite},
		{"InvalidRecords", testInvalidRecords},
		{"ConcurrentRecords", testConcurrentRecords},
		{"ManyRecordsInOneApply", testManyRecordsInOneApply},
		{"CompactRecords", testCompactRecords},
		{"CompactRecordsOutOfOrder", testCompactRecordsOutOfOrder},
		{"RecordsSurviveReopen", testRecordsSurviveReopen},
		{"Fence", testFence},
		{"FenceRejectsOnlyItsBatch", testFenceRejectsOnlyItsBatch},
		{"PatchStatus", testPatchStatus},
		{"PatchStatusBase", testPatchStatusBase},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if why, ok := skip[tc.name]; ok {
				t.Skip(why)
			}
			t.Parallel()
			tc.f(t, newEnv(t, open))
		})
	}
}

// env is one subtest's store and clock.
type env struct {
	s      store.Store
	reopen func() store.Store
	clock  *Clock
	ctx    context.Context
}

func newEnv(t *testing.T, open Opener) *env {
	c := NewClock()
	s, reopen := open(t, c.Now)
	return &env{s: s, reopen: reopen, clock: c, ctx: t.Context()}
}

func (e *env) create(t *testing.T, o *resource.Object) *resource.Object {
	t.Helper()
	got, err := store.Create(e.ctx, e.s, o)
	if err != nil {
		t.Fatalf("Create(%s) = %v", o.Key(), err)
	}
	return got
}

func (e *env) get(t *testing.T, k resource.Key) *resource.Object {
	t.Helper()
	got, err := e.s.Get(e.ctx, k)
	if err != nil {
		t.Fatalf("Get(%s) = %v", k, err)
	}
	return got
}

func (e *env) apply(t *testing.T, ops ...store.Op) []store.Result {
	t.Helper()
	rs, err := e.s.Apply(e.ctx, ops...)
	if err != nil {
		t.Fatalf("Apply = %v", err)
	}
	if len(rs) != len(ops) {
		t.Fatalf("Apply returned %d results for %d ops", len(rs), len(ops))
	}
	return rs
}

func (e *env) changes(t *testing.T, after int64, limit int) []store.Event {
	t.Helper()
	evs, err := e.s.Changes(e.ctx, after, limit)
	if err != nil {
		t.Fatalf("Changes(%d, %d) = %v", after, limit, err)
	}
	return evs
}

// stored returns what the store should hold after creating o at now.
func stored(o *resource.Object, version, revision int64, created, modified time.Time) *resource.Object {
	w := o.Clone()
	w.Version, w.Revision = version, revision
	w.CreationTime, w.ModificationTime = created, modified
	return w
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s = %v, want %v", what, err, target)
	}
}

// event is an Event reduced to what tests compare.
type event struct {
	Type     store.EventType
	Key      resource.Key
	Revision int64
}

func summarize(evs []store.Event) []event {
	out := make([]event, len(evs))
	for i, e := range evs {
		out[i] = event{e.Type, e.Key, e.Revision}
	}
	return out
}

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

func testTooLarge(t *testing.T, e *env) {
	big := meshService(mesh, "big")
	big.Labels["blob"] = strings.Repeat("x", store.MaxObjectBytes)
	_, err := store.Create(e.ctx, e.s, big)
	wantErr(t, "Create(too large)", err, store.ErrTooLarge)
	_, err = e.s.Get(e.ctx, big.Key())
	wantErr(t, "Get after a too-large Create", err, store.ErrNotFound)

	// Just under the limit fits; a status that pushes it over does not.
	o := meshService(mesh, "edge")
	o.Labels["blob"] = strings.Repeat("y", store.MaxObjectBytes-2048)
	o = e.create(t, o)
	o.Status = &resource.ServiceStatus{Conditions: []resource.Condition{{Type: "Big", Status: resource.ConditionTrue, Message: strings.Repeat("z", 4096)}}}
	_, err = store.UpdateStatus(e.ctx, e.s, o)
	wantErr(t, "UpdateStatus(too large)", err, store.ErrTooLarge)
	if got := e.get(t, o.Key()); got.Version != 1 || got.Status != nil {
		t.Errorf("a too-large UpdateStatus changed the object: version %d, status %v", got.Version, got.Status)
	}
}

func testUnicodeAndMaximumLengthNames(t *testing.T, e *env) {
	name63 := strings.Repeat("s", 62) + "1"
	name253 := strings.Repeat(strings.Repeat("d", 62)+".", 4)[:252] + "z"
	mesh63 := "m" + strings.Repeat("-x", 31)
	svc := meshService(mesh63, name63)
	svc.Labels = map[string]string{
		"team":                "ünïcödé ✓ 日本語 🚀",
		"k8s.kuma.io/service": strings.Repeat("v", 63),
		"empty":               "",
	}
	dp := sample(resource.Dataplane, name253)
	dp.Mesh = mesh63
	gen := sample(resource.HostnameGenerator, name253)
	for _, in := range []*resource.Object{svc, dp, gen} {
		got := e.create(t, in)
		want := stored(in, 1, got.Revision, e.clock.Now(), e.clock.Now())
		if diff := cmp.Diff(want, e.get(t, in.Key())); diff != "" {
			t.Errorf("%s: Get after Create (-want +got):\n%s", in.Key(), diff)
		}
	}
	evs := e.changes(t, 0, 0)
	if len(evs) != 3 || evs[1].Key.Name != name253 {
		t.Errorf("Changes = %v", summarize(evs))
	}
}

func testReturnsCopies(t *testing.T, e *env) {
	in := meshService(mesh, "owned")
	in.Status = serviceStatus("owned")
	created := e.create(t, in)
	want := created.Clone()

	mutate := func(o *resource.Object) {
		o.Labels["mutated"] = "yes"
		o.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 1
		o.Spec.(*resource.MeshServiceSpec).Selector.DataplaneTags["x"] = "y"
		o.Status.(*resource.ServiceStatus).VIPs[0].IP = "0.0.0.0"
		o.Version = 100
	}
	mutate(in)
	mutate(created)
	mutate(e.get(t, want.Key()))
	objs, _, err := e.s.List(e.ctx, resource.MeshService)
	if err != nil {
		t.Fatal(err)
	}
	mutate(objs[0])
	mutate(e.changes(t, 0, 0)[0].Object)

	if diff := cmp.Diff(want, e.get(t, want.Key())); diff != "" {
		t.Errorf("mutating inputs and results changed the store (-want +got):\n%s", diff)
	}
}

func testUseAfterClose(t *testing.T, e *env) {
	e.create(t, meshService(mesh, "before"))
	e.applyOK(t, putLease(store.Lease{Name: "before"}))
	ch := e.s.Changed()
	if err := e.s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Error("Close did not wake Changed() waiters")
	}
	_, err := e.s.Get(e.ctx, meshService(mesh, "before").Key())
	wantErr(t, "Get", err, store.ErrClosed)
	_, _, err = e.s.List(e.ctx, "")
	wantErr(t, "List", err, store.ErrClosed)
	_, err = e.s.Apply(e.ctx, store.Op{Type: store.OpCreate, Object: meshService(mesh, "after")})
	wantErr(t, "Apply", err, store.ErrClosed)
	_, err = e.s.Changes(e.ctx, 0, 0)
	wantErr(t, "Changes", err, store.ErrClosed)
	leaseUseAfterClose(t, e)
	if c, ok := e.s.(store.Compacter); ok {
		_, err = c.Compact(e.ctx, time.Hour)
		wantErr(t, "Compact", err, store.ErrClosed)
	}
	wantErr(t, "second Close", e.s.Close(), store.ErrClosed)
}

func testSurvivesReopen(t *testing.T, e *env) {
	a := e.create(t, meshService(mesh, "a"))
	a.Status = serviceStatus("a")
	if _, err := store.UpdateStatus(e.ctx, e.s, a); err != nil {
		t.Fatal(err)
	}
	b := e.create(t, sample(resource.Zone, "b"))
	delB, err := store.Delete(e.ctx, e.s, b.Key(), 0)
	if err != nil {
		t.Fatal(err)
	}
	beforeList, beforeRev, err := e.s.List(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	beforeChanges := e.changes(t, 0, 0)
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}

	e.s = e.reopen()
	afterList, afterRev, err := e.s.List(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(beforeList, afterList); diff != "" || afterRev != beforeRev {
		t.Errorf("List after reopen: revision %d, want %d (-want +got):\n%s", afterRev, beforeRev, diff)
	}
	if diff := cmp.Diff(beforeChanges, e.changes(t, 0, 0)); diff != "" {
		t.Errorf("Changes after reopen (-want +got):\n%s", diff)
	}
	c := e.create(t, meshService(mesh, "c"))
	if c.Revision <= delB {
		t.Errorf("revision after reopen = %d, want > %d", c.Revision, delB)
	}
}
