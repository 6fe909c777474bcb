package meshservices

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/validate"
)

func TestNames(t *testing.T) {
	long := strings.Repeat("very_long_service_name_", 4) + "80" // 94 characters
	for _, tc := range []struct {
		tag, compliant, name string
	}{
		{"backend", "backend", "backend"},
		{"frontend_default_svc_80", "frontend-default-svc-80", "frontend-default-svc-80"},
		{"backend.svc", "backend-svc", "backend-svc"},
		{"Backend", "backend", "backend"},
		{"a:b", "a-b", "a-b"},
		{"00-backend-svc", "svc-00-backend-svc", "svc-00-backend-svc"},
		{"_a_", "a", "a"},
		{"___", "svc", "svc"},
		{long, strings.ToLower(strings.ReplaceAll(long, "_", "-")), "very-long-service-name-very-long-service-name-very-lon-" + tagHash(long)},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			if got := Compliant(tc.tag); got != tc.compliant {
				t.Errorf("Compliant = %q, want %q", got, tc.compliant)
			}
			got := Name(tc.tag)
			if got != tc.name {
				t.Errorf("Name = %q, want %q", got, tc.name)
			}
			if msg := validate.DNS1035Label(got); msg != "" {
				t.Errorf("Name %q is not a DNS-1035 label: %s", got, msg)
			}
			s := Suffixed(tc.tag)
			if msg := validate.DNS1035Label(s); msg != "" || (s == got) != (len(tc.compliant) > maxName) || !strings.HasSuffix(s, "-"+tagHash(tc.tag)) {
				t.Errorf("Suffixed = %q: %s", s, msg)
			}
		})
	}
	// Two long tags with the same first 54 characters get different names.
	a, b := Name(long+"_a"), Name(long+"_b")
	if a == b || len(a) != 63 {
		t.Errorf("long names %q and %q", a, b)
	}
	// The hash is SHA-256's: names must not change between versions.
	if tagHash("x") != "2d711642" {
		t.Errorf("hash of x is %s", tagHash("x"))
	}
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

type inbound struct {
	port  int
	tags  string // "k=v,k=v"; kuma.io/service is the first key
	proto string
}

func dataplane(name string, age int, inbounds ...inbound) *resource.Object {
	spec := &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{Address: "10.0.0.1"}}
	for _, in := range inbounds {
		tags := map[string]string{}
		for _, kv := range strings.Split(in.tags, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				k, v = resource.TagService, kv
			}
			tags[k] = v
		}
		if in.proto != "" {
			tags[resource.TagProtocol] = in.proto
		}
		spec.Networking.Inbound = append(spec.Networking.Inbound, resource.Inbound{Port: in.port, Tags: tags})
	}
	return &resource.Object{Kind: resource.Dataplane, Mesh: "default", Name: name, CreationTime: t0.Add(time.Duration(age) * time.Second), Spec: spec}
}

var opts = Options{Zone: "zone-1", ExportDefault: resource.ExportAll, GracePeriod: time.Hour}

// stored turns a planned create or update into what the store would hold.
func stored(op store.Op, version int64, age int) *resource.Object {
	o := op.Object.Clone()
	o.Version = version
	o.CreationTime = t0.Add(time.Duration(age) * time.Second)
	return o
}

func lookupOf(objs ...*resource.Object) func(string) *resource.Object {
	return func(name string) *resource.Object {
		for _, o := range objs {
			if o.Name == name {
				return o
			}
		}
		return nil
	}
}

func plan(base string, dps []*resource.Object, managed []*resource.Object, others ...*resource.Object) Plan {
	all := append(append([]*resource.Object{}, managed...), others...)
	return PlanUnit(Input{Unit: Unit{Mesh: "default", Base: base}, Dataplanes: dps, Managed: managed, Lookup: lookupOf(all...)}, opts, t0.Add(time.Minute))
}

func port(p int, proto string) resource.Port {
	return resource.Port{Port: p, TargetPort: &resource.IntOrString{Int: p}, AppProtocol: proto}
}

func TestPlan_Create(t *testing.T) {
	p := plan("frontend-default-svc-80",
		[]*resource.Object{dataplane("dp-2", 2, inbound{8080, "frontend_default_svc_80", "http"}), dataplane("dp-1", 1, inbound{8080, "frontend_default_svc_80", "http"}, inbound{9090, "metrics", ""})}, nil)
	if len(p.Ops) != 1 || p.Ops[0].Type != store.OpCreate {
		t.Fatalf("ops %+v, want one create", p.Ops)
	}
	got := p.Ops[0].Object
	want := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "frontend-default-svc-80",
		Labels: map[string]string{
			resource.LabelMesh: "default", resource.LabelDisplayName: "frontend-default-svc-80", resource.LabelManagedBy: "meshservice-generator",
			resource.LabelEnv: "universal", resource.LabelOrigin: "zone", resource.LabelZone: "zone-1",
		},
		Spec: &resource.MeshServiceSpec{
			Selector:   resource.MeshServiceSelector{DataplaneTags: map[string]string{resource.TagService: "frontend_default_svc_80"}},
			Ports:      []resource.Port{port(8080, "http")},
			Identities: []resource.Identity{{Type: resource.IdentityServiceTag, Value: "frontend_default_svc_80"}},
			Export:     &resource.Export{Mode: "All"},
		}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("created (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"dp-1", "dp-2"}, p.Services[0].Dataplanes); d != "" {
		t.Errorf("dataplanes oldest first (-want +got):\n%s", d)
	}
	// The plan validates as a user's MeshService would (but for the
	// display name, which carries the tag).
	if errs := got.Spec.(*resource.MeshServiceSpec).Validate("spec"); len(errs) > 0 {
		t.Errorf("planned spec is invalid: %v", errs)
	}
}

func TestPlan_Ports(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dps       []*resource.Object
		ports     []resource.Port
		condition string // substring of the PortsConsistent message; "" for none
	}{
		{"SeveralInboundsSorted", []*resource.Object{dataplane("dp-1", 1, inbound{9090, "web", "grpc"}, inbound{8080, "web", ""})},
			[]resource.Port{port(8080, "tcp"), port(9090, "grpc")}, ""},
		{"AgreeingDataplanes", []*resource.Object{dataplane("dp-1", 1, inbound{80, "web", "http"}), dataplane("dp-2", 2, inbound{80, "web", "http"})},
			[]resource.Port{port(80, "http")}, ""},
		{"OldestWins", []*resource.Object{
			dataplane("dp-new", 3, inbound{81, "web", "http"}),
			dataplane("dp-old", 1, inbound{80, "web", "http"}),
			dataplane("dp-mid", 2, inbound{80, "web", "http"}),
			dataplane("dp-proto", 4, inbound{80, "web", "grpc"}),
		}, []resource.Port{port(80, "http")}, "the oldest, dp-old, declares [80/http], and these differ: dp-new, dp-proto"},
		{"SameAgeByName", []*resource.Object{dataplane("b", 1, inbound{81, "web", ""}), dataplane("a", 1, inbound{80, "web", ""})},
			[]resource.Port{port(80, "tcp")}, "the oldest, a, declares [80/tcp], and these differ: b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plan("web", tc.dps, nil)
			svc := p.Services[0]
			if d := cmp.Diff(tc.ports, svc.Ports); d != "" {
				t.Errorf("ports (-want +got):\n%s", d)
			}
			checkCondition(t, svc.Conditions, resource.ConditionPortsConsistent, tc.condition)
		})
	}
}

func checkCondition(t *testing.T, conds []resource.Condition, typ, want string) {
	t.Helper()
	var got *resource.Condition
	for i := range conds {
		if conds[i].Type == typ {
			got = &conds[i]
		}
	}
	switch {
	case want == "" && got != nil:
		t.Errorf("unexpected condition %+v", *got)
	case want != "" && got == nil:
		t.Errorf("no %s condition, want one saying %q", typ, want)
	case want != "" && (got.Status != resource.ConditionFalse || !strings.Contains(got.Message, want)):
		t.Errorf("condition %+v, want False saying %q", *got, want)
	}
}

func TestPlan_ExportMode(t *testing.T) {
	em := func(mode string) string { return "web," + resource.LabelExportMode + "=" + mode }
	for _, tc := range []struct {
		name      string
		def       string
		dps       []*resource.Object
		mode      string
		condition string
	}{
		{"DefaultAll", "All", []*resource.Object{dataplane("dp-1", 1, inbound{80, "web", ""})}, "All", ""},
		{"DefaultNone", "None", []*resource.Object{dataplane("dp-1", 1, inbound{80, "web", ""})}, "None", ""},
		{"TagOverridesDefault", "All", []*resource.Object{dataplane("dp-1", 1, inbound{80, em("None"), ""})}, "None", ""},
		{"UntaggedDataplaneHasNoOpinion", "All", []*resource.Object{dataplane("dp-1", 1, inbound{80, "web", ""}), dataplane("dp-2", 2, inbound{80, em("None"), ""})}, "None", ""},
		{"Conflict", "All", []*resource.Object{dataplane("dp-2", 2, inbound{80, em("All"), ""}), dataplane("dp-1", 1, inbound{80, em("None"), ""}), dataplane("dp-3", 3, inbound{80, em("None"), ""})},
			"None", "the oldest that sets it, dp-1, says None; these differ: dp-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			o.ExportDefault = tc.def
			p := PlanUnit(Input{Unit: Unit{Mesh: "default", Base: "web"}, Dataplanes: tc.dps, Lookup: lookupOf()}, o, t0)
			svc := p.Services[0]
			if svc.ExportMode != tc.mode {
				t.Errorf("export mode %q, want %q", svc.ExportMode, tc.mode)
			}
			if got := p.Ops[0].Object.Spec.(*resource.MeshServiceSpec).Export.Mode; got != tc.mode {
				t.Errorf("spec.export.mode %q, want %q", got, tc.mode)
			}
			checkCondition(t, svc.Conditions, resource.ConditionExportModeConsistent, tc.condition)
		})
	}
}

// Two tags with one compliant form do not merge: the first gets the name,
// the other a suffixed one, and each keeps its name afterwards.
func TestPlan_CompliantNameClash(t *testing.T) {
	dps := []*resource.Object{dataplane("dp-dot", 1, inbound{80, "a.b", ""}), dataplane("dp-under", 2, inbound{80, "a_b", ""})}
	p := plan("a-b", dps, nil)
	names := map[string]string{}
	for _, op := range p.Ops {
		names[identityTag(op.Object)] = op.Object.Name
	}
	want := map[string]string{"a.b": "a-b", "a_b": Suffixed("a_b")}
	if d := cmp.Diff(want, names); d != "" {
		t.Fatalf("names (-want +got):\n%s", d)
	}
	// A tag that is its own compliant name comes first among new tags,
	// even when younger.
	p = plan("a-b", append(dps, dataplane("dp-plain", 3, inbound{80, "a-b", ""})), nil)
	for _, op := range p.Ops {
		if identityTag(op.Object) == "a-b" && op.Object.Name != "a-b" {
			t.Errorf("tag a-b named %q", op.Object.Name)
		}
	}
	// Once created, names stay: the plain tag arriving later gets the
	// suffix because a.b holds a-b.
	var managed []*resource.Object
	for i, op := range plan("a-b", dps, nil).Ops {
		managed = append(managed, stored(op, 1, i))
	}
	p = plan("a-b", append(dps, dataplane("dp-plain", 3, inbound{80, "a-b", ""})), managed)
	if len(p.Ops) != 1 || p.Ops[0].Type != store.OpCreate || p.Ops[0].Object.Name != Suffixed("a-b") {
		t.Errorf("ops %+v, want only a create of %s", p.Ops, Suffixed("a-b"))
	}
}

func TestPlan_OperatorOwnedLeftAlone(t *testing.T) {
	own := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "web", Version: 3,
		Labels: map[string]string{resource.LabelDisplayName: "web"}, Spec: &resource.MeshServiceSpec{}}
	p := plan("web", []*resource.Object{dataplane("dp-1", 1, inbound{80, "web", ""})}, nil, own)
	if len(p.Ops) != 0 {
		t.Errorf("ops %+v, want none", p.Ops)
	}
	if s := p.Services[0]; s.Name != "" || !strings.Contains(s.Blocked, `MeshService "web" exists and is not managed by meshnames`) {
		t.Errorf("service %+v, want blocked", s)
	}
	if d := cmp.Diff([]string{"web"}, p.Blockers); d != "" {
		t.Errorf("blockers (-want +got):\n%s", d)
	}
}

func TestPlan_Steady(t *testing.T) {
	dps := []*resource.Object{dataplane("dp-1", 1, inbound{80, "web", ""})}
	ms := stored(plan("web", dps, nil).Ops[0], 1, 0)
	ms.Labels["team"] = "payments" // added by an operator: kept
	if p := plan("web", dps, []*resource.Object{ms}); len(p.Ops) != 0 {
		t.Errorf("steady state writes %+v", p.Ops)
	}
	// A Dataplane's change updates the spec, keeping foreign labels.
	dps[0] = dataplane("dp-1", 1, inbound{80, "web", "http"})
	p := plan("web", dps, []*resource.Object{ms})
	if len(p.Ops) != 1 || p.Ops[0].Type != store.OpUpdate || p.Ops[0].Object.Version != 1 || p.Ops[0].Object.Labels["team"] != "payments" {
		t.Fatalf("ops %+v, want one update of version 1 keeping labels", p.Ops)
	}
	// Conditions are written to status once the spec is right, keeping
	// other controllers' conditions.
	dps = append(dps, dataplane("dp-2", 2, inbound{81, "web", ""}))
	ms = stored(p.Ops[0], 2, 0)
	ms.Status = &resource.ServiceStatus{Conditions: []resource.Condition{{Type: "VIPsAllocated", Status: "False"}}}
	p = plan("web", dps, []*resource.Object{ms})
	if len(p.Ops) != 1 || p.Ops[0].Type != store.OpPatchStatus {
		t.Fatalf("ops %+v, want a status update", p.Ops)
	}
	conds := p.Ops[0].Object.Status.(*resource.ServiceStatus).Conditions
	if len(conds) != 2 || conds[0].Type != "VIPsAllocated" || conds[1].Type != resource.ConditionPortsConsistent {
		t.Errorf("conditions %+v", conds)
	}
	if ms.Status.(*resource.ServiceStatus).Conditions[0].Type != "VIPsAllocated" || len(ms.Status.(*resource.ServiceStatus).Conditions) != 1 {
		t.Error("the plan changed its input")
	}
}

func TestPlan_GracePeriod(t *testing.T) {
	dps := []*resource.Object{dataplane("dp-1", 1, inbound{80, "web", ""})}
	ms := stored(plan("web", dps, nil).Ops[0], 1, 0)
	at := func(now time.Time, dps []*resource.Object, ms *resource.Object) Plan {
		return PlanUnit(Input{Unit: Unit{Mesh: "default", Base: "web"}, Dataplanes: dps, Managed: []*resource.Object{ms}, Lookup: lookupOf(ms)}, opts, now)
	}
	// The last Dataplane goes: the grace period starts.
	now := t0.Add(time.Hour)
	p := at(now, nil, ms)
	if len(p.Ops) != 1 || p.Ops[0].Type != store.OpUpdate || p.Ops[0].Object.Labels[LabelDeletionStarted] != "20261122T110000.000Z" {
		t.Fatalf("ops %+v, want the grace label", p.Ops)
	}
	if !p.Wake.Equal(now.Add(time.Hour)) || !p.Services[0].DeletionAt.Equal(now.Add(time.Hour)) {
		t.Errorf("wake %v, deletion %v", p.Wake, p.Services[0].DeletionAt)
	}
	pending := stored(p.Ops[0], 2, 0)
	// During the period: nothing, wake at its end.
	if p := at(now.Add(59*time.Minute), nil, pending); len(p.Ops) != 0 || !p.Wake.Equal(now.Add(time.Hour)) {
		t.Errorf("during the period: ops %+v, wake %v", p.Ops, p.Wake)
	}
	// At its end: deleted, with the version seen.
	if p := at(now.Add(time.Hour), nil, pending); len(p.Ops) != 1 || p.Ops[0].Type != store.OpDelete || p.Ops[0].Version != 2 || !p.Wake.IsZero() {
		t.Errorf("at the end: ops %+v, wake %v", p.Ops, p.Wake)
	}
	// A Dataplane returns during the period: the label goes.
	p = at(now.Add(time.Minute), dps, pending)
	if len(p.Ops) != 1 || p.Ops[0].Type != store.OpUpdate {
		t.Fatalf("return: ops %+v", p.Ops)
	}
	if _, ok := p.Ops[0].Object.Labels[LabelDeletionStarted]; ok || !p.Wake.IsZero() {
		t.Errorf("return kept the label or a wake-up: %+v", p)
	}
	// An unreadable start restarts the period.
	pending.Labels[LabelDeletionStarted] = "yesterday"
	if p := at(now.Add(2*time.Hour), nil, pending); len(p.Ops) != 1 || p.Ops[0].Object.Labels[LabelDeletionStarted] != formatStarted(now.Add(2*time.Hour)) {
		t.Errorf("unreadable label: ops %+v", p.Ops)
	}
	// Kuma's RFC 3339 is read.
	pending.Labels[LabelDeletionStarted] = now.Add(-30 * time.Minute).Format(time.RFC3339)
	if p := at(now, nil, pending); len(p.Ops) != 0 || !p.Wake.Equal(now.Add(30*time.Minute)) {
		t.Errorf("RFC 3339 label: ops %+v, wake %v", p.Ops, p.Wake)
	}
	if msg := validate.LabelValue(formatStarted(now)); msg != "" {
		t.Errorf("the label value %q is not valid: %s", formatStarted(now), msg)
	}
}

// A service created moments ago that the controller's index has not seen
// yet (its cache echo is still on the way) is the tag's service: planning
// again must not create a second one under the suffixed name.
func TestPlan_AdoptsUnindexedService(t *testing.T) {
	dps := []*resource.Object{dataplane("dp-1", 1, inbound{8080, "frontend_default_svc_80", "http"}), dataplane("dp-2", 2, inbound{8080, "frontend_default_svc_80", "http"})}
	created := stored(plan("frontend-default-svc-80", dps[:1], nil).Ops[0], 1, 0)
	p := PlanUnit(Input{Unit: Unit{Mesh: "default", Base: "frontend-default-svc-80"}, Dataplanes: dps, Lookup: lookupOf(created)}, opts, t0)
	if len(p.Ops) != 0 || len(p.Services) != 1 || p.Services[0].Name != "frontend-default-svc-80" {
		t.Errorf("ops %+v, services %+v: want the existing service adopted and nothing written", p.Ops, p.Services)
	}
}

// The lookup reads a live cache, which may take in the echo of the tag's
// create while the unit is being planned. Whenever that happens, the plan
// must not give the tag a second service under its suffixed name: it
// adopts the service, or creates it again under its name (which the store
// refuses, and the unit is planned again).
func TestPlan_EchoArrivesDuringPlan(t *testing.T) {
	const tag, base = "frontend_default_svc_80", "frontend-default-svc-80"
	dps := []*resource.Object{dataplane("dp-1", 1, inbound{8080, tag, "http"}), dataplane("dp-2", 2, inbound{8080, tag, "http"})}
	created := stored(plan(base, dps[:1], nil).Ops[0], 1, 0)
	for _, tc := range []struct {
		name     string
		misses   int // lookups answered before the cache shows the create
		wantOps  int
		wantName string
	}{
		{"shown before the plan", 0, 0, base},
		{"shown after the first lookup", 1, 1, base},
		{"shown after the second lookup", 2, 1, base},
		{"not shown", 1 << 30, 1, base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			lookup := func(name string) *resource.Object {
				calls++
				if calls <= tc.misses {
					return nil
				}
				return lookupOf(created)(name)
			}
			p := PlanUnit(Input{Unit: Unit{Mesh: "default", Base: base}, Dataplanes: dps, Lookup: lookup}, opts, t0)
			if len(p.Services) != 1 || p.Services[0].Name != tc.wantName || len(p.Ops) != tc.wantOps {
				t.Fatalf("ops %+v, services %+v: want %d ops and the service named %s", p.Ops, p.Services, tc.wantOps, tc.wantName)
			}
			for _, op := range p.Ops {
				if op.Type != store.OpCreate || op.Object.Name != base {
					t.Errorf("op %s of %s, want only a create of %s", op.Type, op.Object.Name, base)
				}
			}
		})
	}
}

// A Kuma 3.x Dataplane's inbounds carry no tags: they name no service, so
// nothing is synthesised for them (not a service named after the empty tag).
func TestPlan_TaglessInboundsNameNoService(t *testing.T) {
	tagless := &resource.Object{Kind: resource.Dataplane, Mesh: "default", Name: "kuma3-1", CreationTime: t0,
		Spec: &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{Address: "10.0.0.2",
			Inbound: []resource.Inbound{{Port: 8080, Name: "http"}}}}}
	tagged := dataplane("dp-1", 1, inbound{9090, "metrics", ""})
	svcs := Report("default", []*resource.Object{tagless, tagged}, nil, opts)
	var names []string
	for _, s := range svcs {
		names = append(names, s.Name)
	}
	if d := cmp.Diff([]string{"metrics"}, names); d != "" {
		t.Errorf("synthesised services (-want +got):\n%s", d)
	}
	if p := plan("svc", []*resource.Object{tagless}, nil); len(p.Ops) != 0 {
		t.Errorf("plan for the empty tag's base has ops %+v, want none", p.Ops)
	}
}

// Report tells what the stored resources show and decides nothing: a grace
// period started ends at its label plus the period, one not started yet has
// no end, and nothing is deleted, whatever the time.
func TestReport_NoClock(t *testing.T) {
	started := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "old", CreationTime: t0,
		Labels: map[string]string{resource.LabelManagedBy: resource.ManagedByMeshServices, LabelDeletionStarted: formatStarted(t0)},
		Spec:   &resource.MeshServiceSpec{Identities: []resource.Identity{{Type: resource.IdentityServiceTag, Value: "old"}}}}
	fresh := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "new", CreationTime: t0,
		Labels: map[string]string{resource.LabelManagedBy: resource.ManagedByMeshServices},
		Spec:   &resource.MeshServiceSpec{Identities: []resource.Identity{{Type: resource.IdentityServiceTag, Value: "new"}}}}
	got := map[string]Service{}
	for _, s := range Report("default", nil, []*resource.Object{started, fresh}, opts) {
		got[s.Name] = s
	}
	if s := got["old"]; !s.Retiring || !s.DeletionAt.Equal(t0.Add(opts.GracePeriod)) {
		t.Errorf("started: %+v, want retiring at %s", s, t0.Add(opts.GracePeriod))
	}
	if s := got["new"]; !s.Retiring || !s.DeletionAt.IsZero() {
		t.Errorf("not started: %+v, want retiring with no end yet", s)
	}
}

// TestManaged: a service another zone synthesised arrives from global with
// the managed-by label; it is not this zone's controller's to change or
// retire.
func TestManaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"synthesised-here", map[string]string{resource.LabelManagedBy: resource.ManagedByMeshServices, resource.LabelOrigin: resource.OriginZone}, true},
		{"synthesised-elsewhere", map[string]string{resource.LabelManagedBy: resource.ManagedByMeshServices, resource.LabelOrigin: resource.OriginGlobal}, false},
		{"written-by-a-user", map[string]string{resource.LabelOrigin: resource.OriginZone}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Managed(&resource.Object{Labels: tc.labels}); got != tc.want {
				t.Errorf("Managed = %v, want %v", got, tc.want)
			}
		})
	}
}
