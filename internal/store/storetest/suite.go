package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

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
		{"CreateDiscardObject", testCreateDiscardObject},
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
