package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

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
