package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/store"
)

func putLease(l store.Lease) store.Op { return store.Op{Type: store.OpPutLease, Lease: &l} }

func deleteLease(name string) store.Op {
	return store.Op{Type: store.OpDeleteLease, Lease: &store.Lease{Name: name}}
}

func (e *env) leases(t *testing.T, prefix string) []store.Lease {
	t.Helper()
	ls, err := e.s.Leases(e.ctx, prefix)
	if err != nil {
		t.Fatalf("Leases(%q) = %v", prefix, err)
	}
	return ls
}

// applyOK applies ops and fails the test unless every op succeeded.
func (e *env) applyOK(t *testing.T, ops ...store.Op) []store.Result {
	t.Helper()
	rs := e.apply(t, ops...)
	for i, r := range rs {
		if r.Err != nil {
			t.Fatalf("op %d (%s): %v", i, ops[i].Type, r.Err)
		}
	}
	return rs
}

// wantLeaseResults checks that lease results carry neither a revision nor
// an object, whether they succeeded or failed.
func wantLeaseResults(t *testing.T, ops []store.Op, rs []store.Result) {
	t.Helper()
	for i, op := range ops {
		if op.Type != store.OpPutLease && op.Type != store.OpDeleteLease {
			continue
		}
		if rs[i].Revision != 0 || rs[i].Object != nil {
			t.Errorf("op %d (%s): Revision %d, Object %v; a lease op has neither", i, op.Type, rs[i].Revision, rs[i].Object)
		}
	}
}

// leaseOpts compares leases: an empty value may read back as nil or empty,
// times compare with Equal (cmp's default for time.Time).
var leaseOpts = cmpopts.EquateEmpty()

func leaseNames(ls []store.Lease) []string {
	names := []string{}
	for _, l := range ls {
		names = append(names, l.Name)
	}
	return names
}

func testLeaseRoundTrip(t *testing.T, e *env) {
	if ls := e.leases(t, ""); len(ls) != 0 {
		t.Fatalf("Leases on an empty store = %v", ls)
	}
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(255 - i) // NUL, invalid UTF-8, everything
	}
	var ascii strings.Builder
	for c := byte(' '); c <= '~'; c++ {
		ascii.WriteByte(c)
	}
	now := e.clock.Now() // has nanoseconds
	in := []store.Lease{
		{Name: "vip/MeshService/241.0.0.7", Value: []byte(`{"mesh":"default","name":"web"}`), ExpiresAt: now.Add(time.Hour)},
		{Name: "never", Value: []byte("v")},
		{Name: "empty-nil"},
		{Name: "empty", Value: []byte{}, ExpiresAt: now.Add(time.Nanosecond)},
		{Name: "binary", Value: binary, ExpiresAt: now.Add(-time.Hour)}, // expired: kept and returned
		{Name: "before-1970", Value: []byte{0}, ExpiresAt: time.Date(1969, 7, 20, 20, 17, 40, 123456789, time.UTC)},
		{Name: "other-zone", Value: []byte("x"), ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("UTC+5:30", 5*3600+1800))},
		{Name: ascii.String(), Value: []byte("every printable ASCII character")},
		{Name: strings.Repeat("n", 253), Value: bytes.Repeat([]byte{0xab}, store.MaxLeaseValueBytes)},
	}
	var ops []store.Op
	for _, l := range in {
		ops = append(ops, putLease(l))
	}
	rs := e.applyOK(t, ops...)
	wantLeaseResults(t, ops, rs)

	want := slices.Clone(in)
	slices.SortFunc(want, func(a, b store.Lease) int { return strings.Compare(a.Name, b.Name) })
	got := e.leases(t, "")
	if diff := cmp.Diff(want, got, leaseOpts); diff != "" {
		t.Fatalf("Leases after put (-want +got):\n%s", diff)
	}
	for i, l := range got {
		switch l.Name {
		case "empty-nil", "empty":
			if len(l.Value) != 0 {
				t.Errorf("%s: Value = %q, want empty", l.Name, l.Value)
			}
		case "vip/MeshService/241.0.0.7":
			if l.ExpiresAt.Nanosecond() != now.Nanosecond() {
				t.Errorf("%s: ExpiresAt %v lost its nanoseconds (want %v)", l.Name, l.ExpiresAt, now.Add(time.Hour))
			}
		}
		if l.ExpiresAt.IsZero() != want[i].ExpiresAt.IsZero() {
			t.Errorf("%s: ExpiresAt = %v, want %v: the zero time (never) must round-trip as zero", l.Name, l.ExpiresAt, want[i].ExpiresAt)
		}
	}

	// The store returns copies: mutating a result changes nothing stored.
	for i := range got {
		if len(got[i].Value) > 0 {
			got[i].Value[0] ^= 0xff
		}
	}
	if diff := cmp.Diff(want, e.leases(t, ""), leaseOpts); diff != "" {
		t.Errorf("mutating results changed the store (-want +got):\n%s", diff)
	}
}

func testLeaseReplaceAndDelete(t *testing.T, e *env) {
	now := e.clock.Now()
	e.applyOK(t, putLease(store.Lease{Name: "a", Value: []byte("first, longer value"), ExpiresAt: now.Add(time.Minute)}),
		putLease(store.Lease{Name: "b", Value: []byte("b")}))

	// A put replaces value and expiry, also with a shorter value and never.
	e.applyOK(t, putLease(store.Lease{Name: "a", Value: []byte("2nd")}))
	want := []store.Lease{{Name: "a", Value: []byte("2nd")}, {Name: "b", Value: []byte("b")}}
	if diff := cmp.Diff(want, e.leases(t, ""), leaseOpts); diff != "" {
		t.Errorf("Leases after replace (-want +got):\n%s", diff)
	}
	e.applyOK(t, putLease(store.Lease{Name: "a", ExpiresAt: now.Add(time.Second)}))
	want[0] = store.Lease{Name: "a", ExpiresAt: now.Add(time.Second)}
	if diff := cmp.Diff(want, e.leases(t, ""), leaseOpts); diff != "" {
		t.Errorf("Leases after replace with an empty value (-want +got):\n%s", diff)
	}

	// Delete, and deleting what does not exist (any more) is fine.
	ops := []store.Op{deleteLease("a"), deleteLease("a"), deleteLease("never-existed")}
	wantLeaseResults(t, ops, e.applyOK(t, ops...))
	if diff := cmp.Diff(want[1:], e.leases(t, ""), leaseOpts); diff != "" {
		t.Errorf("Leases after delete (-want +got):\n%s", diff)
	}

	// Operations on one name apply in order, within a batch and across
	// the batches of one transaction.
	e.applyOK(t, putLease(store.Lease{Name: "c", Value: []byte("c")}), deleteLease("c"),
		deleteLease("d"), putLease(store.Lease{Name: "d", Value: []byte("d1")}), putLease(store.Lease{Name: "d", Value: []byte("d2")}))
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			if _, err := e.s.Apply(e.ctx, putLease(store.Lease{Name: fmt.Sprintf("e%d", i)}), deleteLease(fmt.Sprintf("e%d", i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	want = []store.Lease{{Name: "b", Value: []byte("b")}, {Name: "d", Value: []byte("d2")}}
	if diff := cmp.Diff(want, e.leases(t, ""), leaseOpts); diff != "" {
		t.Errorf("Leases after ordered writes (-want +got):\n%s", diff)
	}
}

func testLeasePrefix(t *testing.T, e *env) {
	names := []string{
		"vip/MeshService/241.0.0.10", "a~~", "a/b/c", "a%b", "B", "a", "a_", "ab", "vip/MeshServices/x", "abc",
		"a/b", "a-b", "a0", "A", "~", "b", "a%", "a_b", "a~", "vip/MeshService/241.0.0.7",
		"vip/MeshExternalService/242.0.0.1", "quarantine/vip/241.0.0.9", "a b", "a!", "a}", "a|",
	}
	var ops []store.Op
	for _, n := range names {
		ops = append(ops, putLease(store.Lease{Name: n, Value: []byte(n)}))
	}
	e.applyOK(t, ops...)

	// Ordered by name, bytewise (as Go compares strings), whatever the
	// database's locale.
	sorted := slices.Sorted(slices.Values(names))
	got := e.leases(t, "")
	if diff := cmp.Diff(sorted, leaseNames(got)); diff != "" {
		t.Errorf("Leases(\"\") names (-want +got):\n%s", diff)
	}
	for _, l := range got {
		if string(l.Value) != l.Name {
			t.Errorf("lease %q has value %q", l.Name, l.Value)
		}
	}
	if diff := cmp.Diff([]string{"a", "a b", "a!", "a%", "a%b", "a-b", "a/b", "a/b/c", "a0", "a_", "a_b", "ab", "abc", "a|", "a}", "a~", "a~~"},
		leaseNames(e.leases(t, "a"))); diff != "" {
		t.Errorf("Leases(\"a\") (-want +got):\n%s", diff)
	}
	for _, prefix := range []string{
		"a", "a%", "a_", "a/", "a/b", "a/b/", "ab", "a~", "a~~", "a}", "~", "A", "b", "a%b", "_", "%",
		"vip/", "vip/MeshService/", "vip/MeshService", "vip/MeshService/241.0.0.7", "quarantine/",
		"z", "abcd", "vip/MeshService/241.0.0.7/more", strings.Repeat("a", 300),
		// No name can start with these; asking is not an error.
		"é", "a\x00", "\xff", "a\x7f", "\t",
	} {
		want := []string{}
		for _, n := range sorted {
			if strings.HasPrefix(n, prefix) {
				want = append(want, n)
			}
		}
		if diff := cmp.Diff(want, leaseNames(e.leases(t, prefix))); diff != "" {
			t.Errorf("Leases(%q) (-want +got):\n%s", prefix, diff)
		}
	}
}

func testLeasesWithStatusInOneApply(t *testing.T, e *env) {
	svc := e.create(t, meshService(mesh, "web"))
	e.clock.Advance(time.Second)
	upd := svc.Clone()
	upd.Status = serviceStatus("web.mesh")
	vip := store.Lease{Name: "vip/MeshService/241.0.0.1", Value: []byte("default/web")}
	quarantine := store.Lease{Name: "quarantine/241.0.0.2", ExpiresAt: e.clock.Now().Add(time.Hour)}
	ops := []store.Op{putLease(vip), {Type: store.OpUpdateStatus, Object: upd}, putLease(quarantine), deleteLease("vip/old")}
	rs := e.applyOK(t, ops...)
	wantLeaseResults(t, ops, rs)
	if rs[1].Revision != svc.Revision+1 || rs[1].Object == nil || rs[1].Object.Version != 2 {
		t.Errorf("UpdateStatus beside leases: revision %d, object %v; want revision %d, version 2", rs[1].Revision, rs[1].Object, svc.Revision+1)
	}
	want := stored(svc, 2, svc.Revision+1, svc.CreationTime, e.clock.Now())
	want.Status = upd.Status
	if diff := cmp.Diff(want, e.get(t, svc.Key())); diff != "" {
		t.Errorf("Get after the batch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]store.Lease{quarantine, vip}, e.leases(t, ""), leaseOpts); diff != "" {
		t.Errorf("Leases after the batch (-want +got):\n%s", diff)
	}
	_, rev, err := e.s.List(e.ctx, "")
	if err != nil || rev != svc.Revision+1 {
		t.Errorf("List revision = %d, %v; want %d: lease ops take no revision", rev, err, svc.Revision+1)
	}
	if diff := cmp.Diff([]event{{store.EventPut, svc.Key(), svc.Revision + 1}}, summarize(e.changes(t, svc.Revision, 0))); diff != "" {
		t.Errorf("Changes after the batch (-want +got):\n%s", diff)
	}
}

func testLeaseAndResourceFailuresIndependent(t *testing.T, e *env) {
	svc := e.create(t, meshService(mesh, "web"))
	stale := svc.Clone()
	stale.Version = 7
	stale.Status = serviceStatus("stale")

	// A failing resource op does not stop the lease ops around it.
	ops := []store.Op{putLease(store.Lease{Name: "before"}), {Type: store.OpUpdateStatus, Object: stale},
		{Type: store.OpCreate, Object: meshService(mesh, "web")}, putLease(store.Lease{Name: "after", Value: []byte("x")})}
	rs := e.apply(t, ops...)
	wantLeaseResults(t, ops, rs)
	if rs[0].Err != nil || rs[3].Err != nil {
		t.Errorf("lease ops beside failing resource ops: %v, %v; want success", rs[0].Err, rs[3].Err)
	}
	wantErr(t, "stale UpdateStatus", rs[1].Err, store.ErrConflict)
	wantErr(t, "second Create", rs[2].Err, store.ErrAlreadyExists)
	if diff := cmp.Diff([]string{"after", "before"}, leaseNames(e.leases(t, ""))); diff != "" {
		t.Errorf("Leases (-want +got):\n%s", diff)
	}

	// Failing lease ops do not stop the resource and lease ops around them,
	// and take no revision.
	upd := svc.Clone()
	upd.Status = serviceStatus("web.mesh")
	ops = []store.Op{
		{Type: store.OpCreate, Object: meshService(mesh, "first")},
		putLease(store.Lease{Name: ""}),
		{Type: store.OpUpdateStatus, Object: upd},
		{Type: store.OpDeleteLease},
		putLease(store.Lease{Name: "too-large", Value: make([]byte, store.MaxLeaseValueBytes+1)}),
		putLease(store.Lease{Name: "ok", Value: []byte("ok")}),
		{Type: store.OpCreate, Object: meshService(mesh, "last")},
	}
	rs = e.apply(t, ops...)
	wantLeaseResults(t, ops, rs)
	for i, failed := range []bool{false, true, false, true, true, false, false} {
		if failed != (rs[i].Err != nil) {
			t.Errorf("op %d (%s): Err = %v, want failed=%v", i, ops[i].Type, rs[i].Err, failed)
		}
	}
	if rs[2].Revision != rs[0].Revision+1 || rs[6].Revision != rs[2].Revision+1 {
		t.Errorf("resource revisions %d, %d, %d; want consecutive: failed lease ops take no revision",
			rs[0].Revision, rs[2].Revision, rs[6].Revision)
	}
	if got := e.get(t, svc.Key()); got.Version != 2 || got.Status == nil {
		t.Errorf("UpdateStatus beside failing lease ops not written: version %d, status %v", got.Version, got.Status)
	}
	if diff := cmp.Diff([]string{"after", "before", "ok"}, leaseNames(e.leases(t, ""))); diff != "" {
		t.Errorf("Leases (-want +got):\n%s", diff)
	}
}

func testLeasesOutsideChangeFeed(t *testing.T, e *env) {
	first := e.create(t, meshService(mesh, "a"))
	before := e.changes(t, 0, 0)

	// Lease-only writes do not wake Changed. PostgreSQL's safety poll may
	// wake a waiter at any time, so a wake-up fails the test only when it
	// happens on every try.
	woken := 0
	const tries = 3
	for i := range tries {
		ch := e.s.Changed()
		e.applyOK(t, putLease(store.Lease{Name: fmt.Sprintf("l%d", i), Value: []byte("v")}),
			putLease(store.Lease{Name: "shared", Value: []byte{byte(i)}}), deleteLease(fmt.Sprintf("l%d", i-1)))
		select {
		case <-ch:
			woken++
		default:
		}
	}
	if woken == tries {
		t.Errorf("Changed() was closed after each of %d lease-only writes; leases must not wake it", tries)
	}

	_, rev, err := e.s.List(e.ctx, "")
	if err != nil || rev != first.Revision {
		t.Errorf("List revision after lease writes = %d, %v; want %d", rev, err, first.Revision)
	}
	if diff := cmp.Diff(before, e.changes(t, 0, 0)); diff != "" {
		t.Errorf("Changes after lease writes (-want +got):\n%s", diff)
	}
	if evs := e.changes(t, first.Revision, 0); len(evs) != 0 {
		t.Errorf("Changes(%d) after lease writes = %v, want none", first.Revision, summarize(evs))
	}
	// The next resource write takes the next revision: no gap.
	if next := e.create(t, meshService(mesh, "b")); next.Revision != first.Revision+1 {
		t.Errorf("revision after lease writes = %d, want %d", next.Revision, first.Revision+1)
	}
	if diff := cmp.Diff([]string{"l2", "shared"}, leaseNames(e.leases(t, ""))); diff != "" {
		t.Errorf("Leases (-want +got):\n%s", diff)
	}
}

func testInvalidLeases(t *testing.T, e *env) {
	keep := store.Lease{Name: "keep", Value: []byte("kept"), ExpiresAt: e.clock.Now()}
	e.applyOK(t, putLease(keep))
	ops := []store.Op{
		{Type: store.OpPutLease},
		{Type: store.OpDeleteLease},
		{Type: store.OpPutLease, Object: meshService(mesh, "not-a-lease")},
		putLease(store.Lease{Name: "", Value: []byte("x")}),
		deleteLease(""),
		putLease(store.Lease{Name: strings.Repeat("n", 254)}),
		deleteLease(strings.Repeat("n", 254)),
		putLease(store.Lease{Name: "nul\x00"}),
		putLease(store.Lease{Name: "tab\there"}),
		putLease(store.Lease{Name: "new\nline"}),
		putLease(store.Lease{Name: "del\x7f"}),
		putLease(store.Lease{Name: "café"}),
		putLease(store.Lease{Name: "bad\xff"}),
		deleteLease("café"),
		putLease(store.Lease{Name: "too-large", Value: make([]byte, store.MaxLeaseValueBytes+1)}),
		putLease(store.Lease{Name: "keep", Value: make([]byte, store.MaxLeaseValueBytes+1)}),
		putLease(store.Lease{Name: "keep", ExpiresAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}),
		putLease(store.Lease{Name: "far-past", ExpiresAt: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)}),
		putLease(store.Lease{Name: "valid", Value: []byte("v")}),
	}
	rs := e.apply(t, ops...)
	wantLeaseResults(t, ops, rs)
	for i, r := range rs[:len(rs)-1] {
		if r.Err == nil {
			t.Errorf("op %d (%s %+v): Err = nil, want an error", i, ops[i].Type, ops[i].Lease)
		}
	}
	if err := rs[len(rs)-1].Err; err != nil {
		t.Errorf("valid lease op in the same batch: %v", err)
	}
	for _, i := range []int{14, 15} {
		wantErr(t, fmt.Sprintf("op %d (value too large)", i), rs[i].Err, store.ErrTooLarge)
	}
	if err := rs[15].Err; err != nil && !strings.HasPrefix(err.Error(), `put lease "keep"`) {
		t.Errorf("error %q, want it to start with %q", err, `put lease "keep"`)
	}
	if diff := cmp.Diff([]store.Lease{keep, {Name: "valid", Value: []byte("v")}}, e.leases(t, ""), leaseOpts); diff != "" {
		t.Errorf("Leases after invalid ops (-want +got):\n%s", diff)
	}
	if _, rev, err := e.s.List(e.ctx, ""); err != nil || rev != 0 {
		t.Errorf("List revision = %d, %v; want 0", rev, err)
	}
}

// testConcurrentLeaseWrites writes leases and resources from many
// goroutines at once (which a backend may group into shared transactions).
func testConcurrentLeaseWrites(t *testing.T, e *env) {
	const writers, each = 8, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	var revs []int64
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				ops := []store.Op{
					putLease(store.Lease{Name: fmt.Sprintf("w%d/%02d", w, i), Value: []byte{byte(w), byte(i)}}),
					putLease(store.Lease{Name: "shared", Value: []byte{byte(w)}}),
				}
				if i%5 == 0 {
					ops = append(ops, store.Op{Type: store.OpCreate, Object: meshService(mesh, fmt.Sprintf("w%d-%d", w, i))})
				}
				rs, err := e.s.Apply(e.ctx, ops...)
				if err != nil {
					t.Error(err)
					return
				}
				for j, r := range rs {
					if r.Err != nil {
						t.Errorf("writer %d op %d: %v", w, j, r.Err)
					}
				}
				if len(rs) == 3 {
					mu.Lock()
					revs = append(revs, rs[2].Revision)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	got := e.leases(t, "")
	if len(got) != writers*each+1 {
		t.Fatalf("Leases = %d, want %d", len(got), writers*each+1)
	}
	for _, l := range got {
		var w, i int
		if l.Name == "shared" {
			if len(l.Value) != 1 || l.Value[0] >= writers {
				t.Errorf("shared lease value %v", l.Value)
			}
		} else if _, err := fmt.Sscanf(l.Name, "w%d/%d", &w, &i); err != nil || !bytes.Equal(l.Value, []byte{byte(w), byte(i)}) {
			t.Errorf("lease %q has value %v", l.Name, l.Value)
		}
	}
	if ws := e.leases(t, "w3/"); len(ws) != each {
		t.Errorf("Leases(\"w3/\") = %d, want %d", len(ws), each)
	}
	// The change feed holds exactly the resource writes, with consecutive
	// revisions from 1.
	slices.Sort(revs)
	evs := e.changes(t, 0, 0)
	var evRevs []int64
	for i, ev := range evs {
		evRevs = append(evRevs, ev.Revision)
		if ev.Revision != int64(i+1) {
			t.Errorf("event %d has revision %d, want %d", i, ev.Revision, i+1)
		}
	}
	if diff := cmp.Diff(revs, evRevs); diff != "" {
		t.Errorf("change feed revisions (-writes +feed):\n%s", diff)
	}
}

func testLeasesSurviveReopen(t *testing.T, e *env) {
	svc := e.create(t, meshService(mesh, "web"))
	svc.Status = serviceStatus("web.mesh")
	e.applyOK(t, store.Op{Type: store.OpUpdateStatus, Object: svc},
		putLease(store.Lease{Name: "vip/MeshService/241.0.0.1", Value: []byte{0, 1, 2, 0xff}, ExpiresAt: e.clock.Now().Add(time.Hour)}),
		putLease(store.Lease{Name: "leader", Value: []byte("instance-1")}),
		putLease(store.Lease{Name: "gone"}))
	e.applyOK(t, deleteLease("gone"))
	before := e.leases(t, "")
	_, beforeRev, err := e.s.List(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}

	e.s = e.reopen()
	if diff := cmp.Diff(before, e.leases(t, ""), leaseOpts); diff != "" || len(before) != 2 {
		t.Errorf("Leases after reopen (-want +got):\n%s", diff)
	}
	if _, rev, err := e.s.List(e.ctx, ""); err != nil || rev != beforeRev {
		t.Errorf("List revision after reopen = %d, %v; want %d", rev, err, beforeRev)
	}
	e.applyOK(t, deleteLease("leader"), putLease(store.Lease{Name: "leader2"}))
	if diff := cmp.Diff([]string{"leader2", "vip/MeshService/241.0.0.1"}, leaseNames(e.leases(t, ""))); diff != "" {
		t.Errorf("Leases after writes after reopen (-want +got):\n%s", diff)
	}
}

// leaseUseAfterClose is the lease part of testUseAfterClose.
func leaseUseAfterClose(t *testing.T, e *env) {
	t.Helper()
	_, err := e.s.Apply(e.ctx, putLease(store.Lease{Name: "after"}))
	wantErr(t, "Apply(put lease)", err, store.ErrClosed)
	_, err = e.s.Apply(e.ctx, deleteLease("before"))
	wantErr(t, "Apply(delete lease)", err, store.ErrClosed)
	for _, prefix := range []string{"", "b"} {
		ls, err := e.s.Leases(e.ctx, prefix)
		wantErr(t, fmt.Sprintf("Leases(%q)", prefix), err, store.ErrClosed)
		if ls != nil {
			t.Errorf("Leases(%q) after Close returned %v", prefix, ls)
		}
	}
}

func createLease(l store.Lease) store.Op { return store.Op{Type: store.OpCreateLease, Lease: &l} }

// testCreateLease checks that OpCreateLease writes only a name that is
// free, expired leases counting as taken, and leaves the existing lease as
// it was when it fails.
func testCreateLease(t *testing.T, e *env) {
	now := e.clock.Now()
	first := store.Lease{Name: "key/1", Value: []byte("first"), ExpiresAt: now.Add(time.Hour)}
	expired := store.Lease{Name: "expired", Value: []byte("old"), ExpiresAt: now.Add(-time.Hour)}
	ops := []store.Op{createLease(first), putLease(expired)}
	wantLeaseResults(t, ops, e.applyOK(t, ops...))

	ops = []store.Op{
		createLease(store.Lease{Name: "key/1", Value: []byte("second")}),
		createLease(store.Lease{Name: "expired", Value: []byte("new")}),
		createLease(store.Lease{Name: "key/2", Value: []byte("two")}),
		// Within one batch the second create of a name sees the first.
		createLease(store.Lease{Name: "key/2", Value: []byte("again")}),
		createLease(store.Lease{Name: "", Value: []byte("x")}),
		createLease(store.Lease{Name: "big", Value: make([]byte, store.MaxLeaseValueBytes+1)}),
		{Type: store.OpCreateLease},
	}
	rs := e.apply(t, ops...)
	wantLeaseResults(t, ops, rs)
	for _, i := range []int{0, 1, 3} {
		wantErr(t, fmt.Sprintf("op %d (create of a taken name)", i), rs[i].Err, store.ErrAlreadyExists)
	}
	if rs[2].Err != nil {
		t.Errorf("create of a free name: %v", rs[2].Err)
	}
	for _, i := range []int{4, 5, 6} {
		if rs[i].Err == nil || errors.Is(rs[i].Err, store.ErrAlreadyExists) {
			t.Errorf("op %d (invalid create): Err = %v, want a validation error", i, rs[i].Err)
		}
	}
	wantErr(t, "op 5", rs[5].Err, store.ErrTooLarge)
	want := []store.Lease{expired, first, {Name: "key/2", Value: []byte("two")}}
	if diff := cmp.Diff(want, e.leases(t, ""), leaseOpts); diff != "" {
		t.Errorf("Leases after creates (-want +got):\n%s", diff)
	}

	// After a delete the name is free again.
	e.applyOK(t, deleteLease("key/1"), createLease(store.Lease{Name: "key/1", Value: []byte("third")}))
	if got := e.leases(t, "key/1"); len(got) != 1 || string(got[0].Value) != "third" {
		t.Errorf("Leases(key/1) after delete and create = %v", got)
	}

	// Concurrent creates of one name: exactly one wins, and the stored
	// value is the winner's.
	const writers = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []byte
	for w := range writers {
		wg.Go(func() {
			rs, err := e.s.Apply(e.ctx, createLease(store.Lease{Name: "race", Value: []byte{byte(w)}}))
			switch {
			case err != nil:
				t.Error(err)
			case rs[0].Err == nil:
				mu.Lock()
				winners = append(winners, byte(w))
				mu.Unlock()
			case !errors.Is(rs[0].Err, store.ErrAlreadyExists):
				t.Errorf("writer %d: %v", w, rs[0].Err)
			}
		})
	}
	wg.Wait()
	got := e.leases(t, "race")
	if len(winners) != 1 || len(got) != 1 || !bytes.Equal(got[0].Value, winners) {
		t.Errorf("concurrent creates: winners %v, stored %v; want one winner whose value is stored", winners, got)
	}
	if _, rev, err := e.s.List(e.ctx, ""); err != nil || rev != 0 {
		t.Errorf("List revision = %d, %v; want 0: lease ops take no revision", rev, err)
	}
}
