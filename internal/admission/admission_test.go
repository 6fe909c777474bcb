package admission

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/validate"
)

func svc(kind resource.Kind, mesh, name string, labels map[string]string) *resource.Object {
	o := &resource.Object{Kind: kind, Mesh: mesh, Name: name, Labels: labels, Spec: resource.MustLookup(kind).NewSpec()}
	switch s := o.Spec.(type) {
	case *resource.MeshServiceSpec:
		s.Ports = []resource.Port{{Port: 80}}
	case *resource.MeshExternalServiceSpec:
		s.Match = []resource.ExternalMatch{{Type: resource.MatchDomain, Value: "example.com", Port: 443, Protocol: resource.ProtocolTLS}}
	case *resource.HostnameGeneratorSpec:
		s.Template = "{{ .Name }}.mesh.local"
		s.Selector.MeshService = &resource.LabelSelector{}
	case *resource.ZoneIngressSpec:
		s.Networking = resource.ZoneIngressNetworking{Address: "192.168.0.1", Port: 10001}
	}
	return o
}

// TestAdmit_Labels pins which labels each writer gets and which forged
// ones are refused, on each mode.
func TestAdmit_Labels(t *testing.T) {
	user := Writer{Source: User}
	tests := []struct {
		name       string
		obj        *resource.Object
		mode, zone string
		w          Writer
		want       map[string]string
		fields     []string
	}{
		{name: "zone-sets-all", obj: svc(resource.MeshService, "m", "web", nil), mode: resource.ModeStandalone, zone: "east", w: user,
			want: map[string]string{resource.LabelOrigin: "zone", resource.LabelZone: "east", resource.LabelDisplayName: "web", resource.LabelMesh: "m"}},
		{name: "repeating-values-is-fine", obj: svc(resource.MeshService, "m", "web", map[string]string{resource.LabelOrigin: "zone", resource.LabelZone: "east", "team": "a"}),
			mode: resource.ModeZone, zone: "east", w: user,
			want: map[string]string{resource.LabelOrigin: "zone", resource.LabelZone: "east", resource.LabelDisplayName: "web", resource.LabelMesh: "m", "team": "a"}},
		{name: "global-no-zone", obj: svc(resource.HostnameGenerator, "", "g", nil), mode: resource.ModeGlobal, w: user,
			want: map[string]string{resource.LabelOrigin: "global", resource.LabelDisplayName: "g"}},
		{name: "mesh-has-none", obj: &resource.Object{Kind: resource.Mesh, Name: "m", Spec: &resource.MeshSpec{}}, mode: resource.ModeStandalone, zone: "east", w: user},
		{name: "forged-origin-zone-name-mesh", obj: svc(resource.MeshExternalService, "m", "x",
			map[string]string{resource.LabelOrigin: "global", resource.LabelZone: "west", resource.LabelDisplayName: "other", resource.LabelMesh: "y"}),
			mode: resource.ModeStandalone, zone: "east", w: user,
			fields: []string{`labels["kuma.io/origin"]`, `labels["kuma.io/zone"]`, `labels["kuma.io/display-name"]`, `labels["kuma.io/mesh"]`}},
		{name: "zone-label-on-global", obj: svc(resource.MeshExternalService, "m", "x", map[string]string{resource.LabelZone: "east"}),
			mode: resource.ModeGlobal, w: user, fields: []string{`labels["kuma.io/zone"]`}},
		{name: "not-written-here", obj: svc(resource.MeshService, "m", "x", nil), mode: resource.ModeGlobal, w: user, fields: []string{"type"}},
		{name: "zone-stream-attributed-to-its-zone", obj: svc(resource.MeshService, "m", "redis-abc", map[string]string{resource.LabelDisplayName: "redis"}),
			mode: resource.ModeGlobal, w: Writer{Source: FromZone, Zone: "east"},
			want: map[string]string{resource.LabelOrigin: "zone", resource.LabelZone: "east", resource.LabelDisplayName: "redis", resource.LabelMesh: "m"}},
		{name: "zone-stream-claiming-another-zone", obj: svc(resource.MeshService, "m", "redis", map[string]string{resource.LabelZone: "west"}),
			mode: resource.ModeGlobal, w: Writer{Source: FromZone, Zone: "east"}, fields: []string{`labels["kuma.io/zone"]`}},
		{name: "zone-stream-sends-no-mesh", obj: &resource.Object{Kind: resource.Mesh, Name: "m", Spec: &resource.MeshSpec{}},
			mode: resource.ModeGlobal, w: Writer{Source: FromZone, Zone: "east"}, fields: []string{"type"}},
		{name: "global-stream-keeps-zone", obj: svc(resource.MeshService, "m", "redis-abc", map[string]string{resource.LabelZone: "east", resource.LabelDisplayName: "redis"}),
			mode: resource.ModeZone, zone: "west", w: Writer{Source: FromGlobal},
			want: map[string]string{resource.LabelOrigin: "global", resource.LabelZone: "east", resource.LabelDisplayName: "redis", resource.LabelMesh: "m"}},
		{name: "zone-ingress-in-its-zone", obj: svc(resource.ZoneIngress, "", "ingress-1", nil), mode: resource.ModeZone, zone: "east", w: user,
			want: map[string]string{resource.LabelOrigin: "zone", resource.LabelZone: "east", resource.LabelDisplayName: "ingress-1"}},
		{name: "zone-ingress-claiming-another-zone", obj: svc(resource.ZoneIngress, "", "ingress-1", map[string]string{resource.LabelZone: "west"}),
			mode: resource.ModeStandalone, zone: "east", w: user, fields: []string{`labels["kuma.io/zone"]`}},
		{name: "zone-ingress-not-on-global", obj: svc(resource.ZoneIngress, "", "ingress-1", nil), mode: resource.ModeGlobal, w: user, fields: []string{"type"}},
		{name: "zone-ingress-from-its-zone", obj: svc(resource.ZoneIngress, "", "ingress-1-abc", map[string]string{resource.LabelDisplayName: "ingress-1"}),
			mode: resource.ModeGlobal, w: Writer{Source: FromZone, Zone: "east"},
			want: map[string]string{resource.LabelOrigin: "zone", resource.LabelZone: "east", resource.LabelDisplayName: "ingress-1"}},
		{name: "zone-ingress-from-global-keeps-zone", obj: svc(resource.ZoneIngress, "", "ingress-1-abc", map[string]string{resource.LabelZone: "east", resource.LabelDisplayName: "ingress-1"}),
			mode: resource.ModeZone, zone: "west", w: Writer{Source: FromGlobal},
			want: map[string]string{resource.LabelOrigin: "global", resource.LabelZone: "east", resource.LabelDisplayName: "ingress-1"}},
		{name: "global-stream-on-standalone", obj: svc(resource.MeshService, "m", "x", nil),
			mode: resource.ModeStandalone, w: Writer{Source: FromGlobal}, fields: []string{"type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := New(Options{Mode: tt.mode, Zone: tt.zone}).Admit(tt.obj, tt.w)
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
			}
			if d := cmp.Diff(tt.fields, fields); d != "" {
				t.Errorf("violations (-want +got):\n%s", d)
			}
			if tt.fields == nil {
				if d := cmp.Diff(tt.want, tt.obj.Labels, cmpEmptyMap); d != "" {
					t.Errorf("labels (-want +got):\n%s", d)
				}
			}
		})
	}
}

// TestAdmit_DisplayName: with a DisplayName (the Kubernetes store's), a
// MeshService named "web.shop" is checked and labelled as "web", the name
// its hostnames see; without one "web.shop" is not a service name.
func TestAdmit_DisplayName(t *testing.T) {
	k8s := New(Options{Mode: resource.ModeStandalone, Zone: "east", DisplayName: func(k resource.Key) string {
		name, _, _ := strings.Cut(k.Name, ".")
		return name
	}})
	obj := svc(resource.MeshService, "m", "web.shop", nil)
	if errs := k8s.Admit(obj, Writer{Source: System}); len(errs) > 0 {
		t.Fatalf("Admit with the Kubernetes display name: %v", errs)
	}
	if got := obj.Labels[resource.LabelDisplayName]; got != "web" {
		t.Errorf("display name label = %q, want web", got)
	}
	plain := New(Options{Mode: resource.ModeStandalone, Zone: "east"})
	errs := plain.Admit(svc(resource.MeshService, "m", "web.shop", nil), Writer{Source: System})
	if len(errs) != 1 || errs[0].Field != "name" {
		t.Errorf("Admit without a display name: %v, want one violation of name", errs)
	}
	bad := svc(resource.MeshService, "m", "Web_1.shop", nil)
	if errs := k8s.Admit(bad, Writer{Source: System}); len(errs) != 1 || errs[0].Field != "name" {
		t.Errorf("Admit of an invalid display name: %v, want one violation of name", errs)
	}
}

// TestAdmit_LongDisplayName: a Dataplane named with a valid 250-byte
// subdomain is admitted with its display name shortened as
// resource.DisplayName says, so that the label is valid where the
// Dataplane is synced; the full name, as Kuma writes the label, is taken
// for it; another value is still refused.
func TestAdmit_LongDisplayName(t *testing.T) {
	name := strings.Repeat("a", 61) + "." + strings.Repeat("b", 62) + "." + strings.Repeat("c", 62) + "." + strings.Repeat("d", 62)
	dp := func(labels map[string]string) *resource.Object {
		return &resource.Object{Kind: resource.Dataplane, Mesh: "m", Name: name, Labels: labels,
			Spec: &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{Address: "10.0.0.1"}}}
	}
	zone := New(Options{Mode: resource.ModeZone, Zone: "east"})
	for _, labels := range []map[string]string{nil, {resource.LabelDisplayName: name}, {resource.LabelDisplayName: resource.DisplayName(name)}} {
		obj := dp(labels)
		if errs := zone.Admit(obj, Writer{Source: User}); len(errs) > 0 {
			t.Fatalf("Admit with labels %v: %v", labels, errs)
		}
		if got := obj.Labels[resource.LabelDisplayName]; got != resource.DisplayName(name) || len(got) > 63 {
			t.Errorf("display name label = %q, want %q", got, resource.DisplayName(name))
		}
	}
	errs := zone.Admit(dp(map[string]string{resource.LabelDisplayName: "other"}), Writer{Source: User})
	if len(errs) != 1 || errs[0].Field != `labels["kuma.io/display-name"]` {
		t.Errorf("Admit of a forged display name: %v, want one violation of it", errs)
	}
}

// TestAdmit_DerivedLabelsAreValidated: the labels the control plane
// sets are checked like those a user gives, since every control plane
// the resource reaches checks them: a resource of a mesh whose name is
// too long for the kuma.io/mesh label is refused where it is written.
func TestAdmit_DerivedLabelsAreValidated(t *testing.T) {
	mesh := strings.Repeat("m", 40) + "." + strings.Repeat("n", 40)
	errs := New(Options{Mode: resource.ModeZone, Zone: "east"}).Admit(svc(resource.MeshService, mesh, "web", nil), Writer{Source: User})
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field)
	}
	if d := cmp.Diff([]string{"mesh", `labels["kuma.io/mesh"]`}, fields); d != "" {
		t.Errorf("violations (-want +got):\n%s\n%v", d, errs)
	}
}

var cmpEmptyMap = cmp.FilterValues(func(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestOwner(t *testing.T) {
	for _, d := range resource.Descriptors() {
		for _, mode := range []string{resource.ModeStandalone, resource.ModeZone, resource.ModeGlobal} {
			owner := Owner(d.Kind, mode)
			zoneOwned := d.Kind == resource.MeshService || d.Kind == resource.Dataplane || d.Kind == resource.ZoneIngress
			globalOwned := d.Kind == resource.MeshMultiZoneService || d.Kind == resource.Mesh || d.Kind == resource.Zone
			want := mode == resource.ModeGlobal && zoneOwned || mode == resource.ModeZone && globalOwned
			if (owner != "") != want {
				t.Errorf("Owner(%s, %s) = %q; want read-only %v", d.Kind, mode, owner, want)
			}
		}
	}
}

// env is an Admitter over a real embedded store and its cache.
func env(t *testing.T, mode, zone string) (*Admitter, store.Store) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := cache.New(st, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !c.WaitSynced(wctx) {
		t.Fatal("cache did not sync")
	}
	return New(Options{Mode: mode, Zone: zone, Store: st, Cache: c}), st
}

func put(t *testing.T, a *Admitter, obj *resource.Object, w Writer) (Outcome, error) {
	t.Helper()
	out, err := a.Put(context.Background(), obj, w, PutOptions{})
	if err == nil {
		if werr := a.o.Cache.WaitFor(context.Background(), out.Object.Revision); werr != nil {
			t.Fatal(werr)
		}
	}
	return out, err
}

// TestPut_SyncedResourcesAreReadOnly: a zone's users cannot change or
// delete what the global sent, and the global's users cannot change a
// zone's resources; the owning stream can.
func TestPut_SyncedResourcesAreReadOnly(t *testing.T) {
	ctx := context.Background()
	t.Run("zone", func(t *testing.T) {
		a, _ := env(t, resource.ModeZone, "west")
		mesh := &resource.Object{Kind: resource.Mesh, Name: "m", Spec: &resource.MeshSpec{}}
		if _, err := put(t, a, mesh, Writer{Source: FromGlobal}); err != nil {
			t.Fatal(err)
		}
		synced := svc(resource.MeshService, "m", "redis-1", map[string]string{resource.LabelZone: "east", resource.LabelDisplayName: "redis"})
		if _, err := put(t, a, synced, Writer{Source: FromGlobal}); err != nil {
			t.Fatal(err)
		}
		changed := svc(resource.MeshService, "m", "redis-1", map[string]string{"team": "x"})
		if _, err := put(t, a, changed, Writer{Source: User}); !errors.Is(err, ErrReadOnly) {
			t.Errorf("user update of a synced service: err = %v, want ErrReadOnly", err)
		}
		if _, err := a.Delete(ctx, synced.Key(), Writer{Source: User}, 0); !errors.Is(err, ErrReadOnly) {
			t.Errorf("user delete of a synced service: err = %v, want ErrReadOnly", err)
		}
		local := svc(resource.MeshService, "m", "web", nil)
		if _, err := put(t, a, local, Writer{Source: User}); err != nil {
			t.Fatal(err)
		}
		over := svc(resource.MeshService, "m", "web", map[string]string{resource.LabelZone: "east"})
		if _, err := put(t, a, over, Writer{Source: FromGlobal}); !errors.Is(err, ErrReadOnly) {
			t.Errorf("global stream over a local service: err = %v, want ErrReadOnly", err)
		}
		if _, err := a.Delete(ctx, synced.Key(), Writer{Source: FromGlobal}, 0); err != nil {
			t.Errorf("global stream delete: %v", err)
		}
	})
	t.Run("global", func(t *testing.T) {
		a, _ := env(t, resource.ModeGlobal, "")
		mesh := &resource.Object{Kind: resource.Mesh, Name: "m", Spec: &resource.MeshSpec{}}
		if _, err := put(t, a, mesh, Writer{Source: User}); err != nil {
			t.Fatal(err)
		}
		east := Writer{Source: FromZone, Zone: "east"}
		if _, err := put(t, a, svc(resource.MeshService, "m", "redis-1", nil), east); err != nil {
			t.Fatal(err)
		}
		if _, err := put(t, a, svc(resource.MeshService, "m", "redis-1", map[string]string{"x": "y"}), Writer{Source: FromZone, Zone: "west"}); !errors.Is(err, ErrReadOnly) {
			t.Errorf("west replacing east's service: err = %v, want ErrReadOnly", err)
		}
		if _, err := a.Delete(ctx, resource.Key{Kind: resource.MeshService, Mesh: "m", Name: "redis-1"}, Writer{Source: FromZone, Zone: "west"}, 0); !errors.Is(err, ErrReadOnly) {
			t.Errorf("west deleting east's service: err = %v, want ErrReadOnly", err)
		}
		gen := svc(resource.HostnameGenerator, "", "g", nil)
		if _, err := put(t, a, gen, Writer{Source: User}); err != nil {
			t.Fatal(err)
		}
		if _, err := put(t, a, svc(resource.HostnameGenerator, "", "g", nil), east); !errors.Is(err, ErrReadOnly) {
			t.Errorf("a zone replacing the global's generator: err = %v, want ErrReadOnly", err)
		}
	})
}

// TestPut_Results: created, unchanged, updated, If-Match conflicts, and a
// missing mesh, with Plan answering the same without writing.
func TestPut_Results(t *testing.T) {
	ctx := context.Background()
	a, st := env(t, resource.ModeStandalone, "default")
	u := Writer{Source: User}
	web := func(port int) *resource.Object {
		o := svc(resource.MeshService, "m", "web", nil)
		o.Spec.(*resource.MeshServiceSpec).Ports[0].Port = port
		return o
	}
	if _, err := a.Plan(ctx, web(80), u, PutOptions{}); err == nil {
		t.Fatal("Plan before the mesh exists: no error")
	} else if errs, ok := validate.From(err); !ok || errs[0].Field != "mesh" {
		t.Fatalf("Plan before the mesh exists: %v, want a violation of mesh", err)
	}
	if r, err := a.Plan(ctx, web(80), u, PutOptions{MeshesDefined: map[string]bool{"m": true}}); err != nil || r != Created {
		t.Fatalf("Plan with the mesh defined by the batch = %q, %v", r, err)
	}
	if _, err := put(t, a, &resource.Object{Kind: resource.Mesh, Name: "m", Spec: &resource.MeshSpec{}}, u); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		obj  *resource.Object
		want Result
	}{{web(80), Created}, {web(80), Unchanged}, {web(81), Updated}}
	for i, s := range steps {
		if r, err := a.Plan(ctx, s.obj.Clone(), u, PutOptions{}); err != nil || r != s.want {
			t.Errorf("step %d: Plan = %q, %v, want %q", i, r, err, s.want)
		}
		out, err := put(t, a, s.obj, u)
		if err != nil || out.Result != s.want {
			t.Errorf("step %d: Put = %q, %v, want %q", i, out.Result, err, s.want)
		}
	}
	stored, _ := st.Get(ctx, web(0).Key())
	if _, err := a.Put(ctx, web(82), u, PutOptions{IfMatch: stored.Version - 1}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("stale If-Match: err = %v, want a conflict", err)
	}
	if _, err := a.Delete(ctx, resource.Key{Kind: resource.Mesh, Name: "m"}, u, 0); !errors.Is(err, ErrMeshNotEmpty) {
		t.Errorf("deleting a mesh that holds a service: err = %v, want ErrMeshNotEmpty", err)
	}
	after, _ := st.Get(ctx, web(0).Key())
	if after.Version != stored.Version {
		t.Errorf("refused writes changed the service: version %d -> %d", stored.Version, after.Version)
	}
}

// TestValidate_SystemLabelsDoNotCount checks that a document with the
// maximum of user labels still validates after Admit added the labels the
// control plane owns, so that what the API returns can be applied again.
func TestValidate_SystemLabelsDoNotCount(t *testing.T) {
	o := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "web", Labels: map[string]string{}, Spec: &resource.MeshServiceSpec{}}
	for i := range resource.MaxLabels {
		o.Labels[fmt.Sprintf("l%d", i)] = "v"
	}
	if errs := New(Options{Mode: resource.ModeStandalone, Zone: "east"}).Admit(o, Writer{Source: User}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(o.Labels) != resource.MaxLabels+4 {
		t.Fatalf("Admit left %d labels, want %d", len(o.Labels), resource.MaxLabels+4)
	}
	if errs := resource.Validate(o); len(errs) > 0 {
		t.Errorf("Validate after Admit = %v, want no violations", errs)
	}
	// A zone adds kuma.io/env to a service it sends without one, and the
	// global admits it so.
	o.Labels[resource.LabelEnv] = resource.EnvUniversal
	if errs := resource.Validate(o); len(errs) > 0 {
		t.Errorf("Validate with kuma.io/env added = %v, want no violations", errs)
	}
}

// fakeCreator stores MeshServices as a controllers' runner would: each
// with a status (one condition) and the creation's With ops in the same
// transaction. ok false answers "no controllers"; race has another writer
// take the key first.
type fakeCreator struct {
	st    store.Store
	ok    bool
	race  bool
	calls int
}

func (f *fakeCreator) Decides(k resource.Kind) bool { return k == resource.MeshService }

func (f *fakeCreator) Create(ctx context.Context, cs []store.Creation) ([]store.Result, bool, error) {
	f.calls++
	if !f.ok {
		return nil, false, nil
	}
	if f.race {
		f.race = false
		other := cs[0].Object.Clone()
		other.Labels = map[string]string{"team": "other"}
		if _, err := store.Create(ctx, f.st, other); err != nil {
			return nil, true, err
		}
		return []store.Result{{Err: store.ErrAlreadyExists}}, true, nil
	}
	var ops []store.Op
	var at []int
	for _, c := range cs {
		c.Object.Status = &resource.ServiceStatus{Conditions: []resource.Condition{{Type: "Named", Status: resource.ConditionTrue}}}
		at = append(at, len(ops))
		ops = append(ops, store.Op{Type: store.OpCreate, Object: c.Object, DiscardObject: true})
		for _, w := range c.With {
			w.DependsOn = []int{at[len(at)-1]}
			ops = append(ops, w)
		}
	}
	rs, err := f.st.Apply(ctx, ops...)
	if err != nil {
		return nil, true, err
	}
	out := make([]store.Result, len(cs))
	for i, j := range at {
		out[i] = rs[j]
	}
	return out, true, nil
}

// accompanying adds a lease to every write it accompanies, as the API's
// auditing store adds an audit entry.
type accompanying struct {
	store.Store
	committed int
}

func (a *accompanying) Accompany(_ context.Context, t store.OpType) ([]store.Op, func()) {
	return []store.Op{{Type: store.OpPutLease, Lease: &store.Lease{Name: "with-" + t.String(), Value: []byte("x"), ExpiresAt: time.Now().Add(time.Hour)}}},
		func() { a.committed++ }
}

// TestPut_CreatesThroughTheCreator: a new resource of a kind the creator
// decides is stored by it, with its status and the store's accompanying
// writes in one transaction, and Put returns it as stored; other kinds,
// updates, and a creator without controllers write plain; a key taken
// meanwhile is retried as an update.
func TestPut_CreatesThroughTheCreator(t *testing.T) {
	ctx := context.Background()
	a, st := env(t, resource.ModeStandalone, "default")
	acc := &accompanying{Store: st}
	f := &fakeCreator{st: st, ok: true}
	a.o.Store, a.o.Creator = acc, f
	u := Writer{Source: User}
	if _, err := put(t, a, &resource.Object{Kind: resource.Mesh, Name: "m", Spec: &resource.MeshSpec{}}, u); err != nil {
		t.Fatal(err)
	}
	named := func(o *resource.Object) bool {
		s, ok := o.Status.(*resource.ServiceStatus)
		return ok && s != nil && len(s.Conditions) == 1 && s.Conditions[0].Type == "Named"
	}

	out, err := put(t, a, svc(resource.MeshService, "m", "web", nil), u)
	if err != nil || out.Result != Created {
		t.Fatalf("Put web = %q, %v", out.Result, err)
	}
	if f.calls != 1 || !named(out.Object) || out.Object.Version != 1 || out.Object.CreationTime.IsZero() {
		t.Errorf("web: creator called %d times, returned %+v; want one call and the stored object, named, at version 1", f.calls, out.Object)
	}
	if ls, err := st.Leases(ctx, "with-"); err != nil || len(ls) != 1 || acc.committed != 1 {
		t.Errorf("accompanying write: leases %v (%v), committed %d; want it written with the create and reported once", ls, err, acc.committed)
	}

	// An update is not a create: written plain, the creator not asked.
	changed := svc(resource.MeshService, "m", "web", map[string]string{"team": "a"})
	if out, err := put(t, a, changed, u); err != nil || out.Result != Updated || f.calls != 1 {
		t.Errorf("update: %q, %v, creator calls %d; want Updated without the creator", out.Result, err, f.calls)
	}
	// A kind the creator does not decide.
	if out, err := put(t, a, svc(resource.HostnameGenerator, "", "g", nil), u); err != nil || out.Result != Created || f.calls != 1 {
		t.Errorf("generator: %q, %v, creator calls %d; want Created without the creator", out.Result, err, f.calls)
	}
	// A key another writer takes between the check and the write: Put
	// sees it and updates it.
	f.race = true
	if out, err := put(t, a, svc(resource.MeshService, "m", "raced", map[string]string{"team": "b"}), u); err != nil || out.Result != Updated {
		t.Errorf("raced create: %q, %v; want Updated over the other writer's", out.Result, err)
	}
	// No controllers running: a plain create, without status.
	f.ok = false
	if out, err := put(t, a, svc(resource.MeshService, "m", "plain", nil), u); err != nil || out.Result != Created || named(out.Object) {
		t.Errorf("without controllers: %q, %v, %+v; want a plain create", out.Result, err, out.Object)
	}
	if acc.committed != 1 {
		t.Errorf("accompanying writes reported %d times, want 1: only the creator's write carried them", acc.committed)
	}
}
