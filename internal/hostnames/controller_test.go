package hostnames

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/reconcile/reconciletest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

type env struct {
	*reconciletest.Env
	t  *testing.T
	st store.Store
}

// newEnv runs the core in a runner over a real embedded store and cache.
func newEnv(t *testing.T, opts ...sqlite.Option) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st}
	e.mustCreate(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}})
	e.Env = reconciletest.Start(t, st, reconciletest.Options{Cores: func() []reconcile.Core {
		return []reconcile.Core{New(Options{Zone: "east", ServiceTagDomain: "mesh", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})}
	}})
	return e
}

func (e *env) mustCreate(o *resource.Object) *resource.Object {
	e.t.Helper()
	if errs := admission.New(admission.Options{Mode: resource.ModeStandalone, Zone: "east"}).Admit(o, admission.Writer{Source: admission.System}); len(errs) > 0 {
		e.t.Fatalf("invalid fixture %s: %v", o.Key(), errs)
	}
	got, err := store.Create(context.Background(), e.st, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func (e *env) get(k resource.Key) *resource.Object {
	e.t.Helper()
	o, err := e.st.Get(context.Background(), k)
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

func (e *env) update(o *resource.Object) {
	e.t.Helper()
	if _, err := store.Update(context.Background(), e.st, o); err != nil {
		e.t.Fatal(err)
	}
}

// eventually waits until the addresses of k, summarised as
// "hostname=Status", equal want.
func (e *env) eventually(k resource.Key, want ...string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		o, err := e.st.Get(context.Background(), k)
		if err == nil {
			got = summary(o)
			if cmp.Equal(want, got) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("addresses of %s = %v, want %v", k, got, want)
}

func summary(o *resource.Object) []string {
	st, ok := o.Status.(resource.ServiceStatusOf)
	if !ok || st == nil {
		return nil
	}
	var out []string
	for _, a := range st.Service().Addresses {
		out = append(out, a.Hostname+"="+a.Status)
	}
	return out
}

func generator(name string, kind resource.Kind, match map[string]string, template string) *resource.Object {
	spec := &resource.HostnameGeneratorSpec{Template: template}
	sel := &resource.LabelSelector{MatchLabels: match}
	switch kind {
	case resource.MeshService:
		spec.Selector.MeshService = sel
	case resource.MeshExternalService:
		spec.Selector.MeshExternalService = sel
	case resource.MeshMultiZoneService:
		spec.Selector.MeshMultiZoneService = sel
	}
	return &resource.Object{Kind: resource.HostnameGenerator, Name: name, Spec: spec}
}

func meshService(name string, labels map[string]string) *resource.Object {
	return &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: name, Labels: labels,
		Spec: &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 80}}}}
}

func externalService(name string) *resource.Object {
	return &resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: name,
		Spec: &resource.MeshExternalServiceSpec{Match: []resource.ExternalMatch{{Type: resource.MatchDomain, Value: "example.com", Port: 443, Protocol: "tls"}}}}
}

func key(kind resource.Kind, name string) resource.Key {
	return resource.Key{Kind: kind, Mesh: "default", Name: name}
}

func TestController_NamesServicesAndReportsCrossKindCollisions(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(generator("svc", resource.MeshService, nil, "{{ .Name }}.mesh.local"))
	e.mustCreate(meshService("redis", nil))
	e.eventually(key(resource.MeshService, "redis"), "redis.mesh.local=Available")

	// An external service rendering the same name loses to the older claim,
	// and the reason names the holder.
	e.mustCreate(generator("ext", resource.MeshExternalService, nil, "{{ .Name }}.mesh.local"))
	e.mustCreate(externalService("redis"))
	e.eventually(key(resource.MeshExternalService, "redis"), "redis.mesh.local=NotAvailable")
	mes := e.get(key(resource.MeshExternalService, "redis"))
	reason := mes.Status.(resource.ServiceStatusOf).Service().Addresses[0].Reason
	if want := `hostname "redis.mesh.local" is already taken by MeshService default/redis (from generator svc), which has precedence`; reason != want {
		t.Errorf("reason = %q, want %q", reason, want)
	}

	// When the holder goes, the other claimant gets the name with no other event.
	if _, err := store.Delete(context.Background(), e.st, key(resource.MeshService, "redis"), 0); err != nil {
		t.Fatal(err)
	}
	e.eventually(key(resource.MeshExternalService, "redis"), "redis.mesh.local=Available")
}

// TestController_ServiceTagCollidesWithGeneratedHostname checks seed 004's
// service-tag names in the one table of names: a MeshService's tag gives
// it <tag>.mesh and the two aliases, listed in status.addresses with
// origins ServiceTag and ServiceTagAlias; a generated hostname equal to an
// alias holds it although its service is newer, and both statuses say so;
// the alias comes back when the generator goes.
func TestController_ServiceTagCollidesWithGeneratedHostname(t *testing.T) {
	e := newEnv(t)
	front := meshService("frontend", nil)
	front.Spec.(*resource.MeshServiceSpec).Identities = []resource.Identity{{Type: resource.IdentityServiceTag, Value: "frontend_default_svc_80"}}
	e.mustCreate(front)
	fk := key(resource.MeshService, "frontend")
	e.eventually(fk, "frontend_default_svc_80.mesh=Available", "frontend-default-svc-80.mesh=Available", "frontend.default.svc.80.mesh=Available")

	e.mustCreate(generator("squat", resource.MeshService, map[string]string{"app": "squat"}, "frontend.default.svc.80.mesh"))
	e.mustCreate(meshService("squatter", map[string]string{"app": "squat"}))
	sk := key(resource.MeshService, "squatter")
	e.eventually(sk, "frontend.default.svc.80.mesh=Available")
	e.eventually(fk, "frontend_default_svc_80.mesh=Available", "frontend-default-svc-80.mesh=Available", "frontend.default.svc.80.mesh=NotAvailable")

	want := []resource.Address{
		{Hostname: "frontend_default_svc_80.mesh", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginServiceTag, Name: "frontend_default_svc_80"}},
		{Hostname: "frontend-default-svc-80.mesh", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginServiceTagAlias, Name: "frontend_default_svc_80"}},
		{Hostname: "frontend.default.svc.80.mesh", Status: resource.AddressNotAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginServiceTagAlias, Name: "frontend_default_svc_80"},
			Reason: `hostname "frontend.default.svc.80.mesh" is already taken by MeshService default/squatter (from generator squat), which has precedence`},
	}
	if diff := cmp.Diff(want, e.get(fk).Status.(resource.ServiceStatusOf).Service().Addresses); diff != "" {
		t.Errorf("frontend's addresses (-want +got):\n%s", diff)
	}
	wantSquatter := []resource.Address{{Hostname: "frontend.default.svc.80.mesh", Status: resource.AddressAvailable,
		Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "squat"},
		Reason: "also claimed by MeshService default/frontend (an alias of its service tag), which does not get it"}}
	if diff := cmp.Diff(wantSquatter, e.get(sk).Status.(resource.ServiceStatusOf).Service().Addresses); diff != "" {
		t.Errorf("squatter's addresses (-want +got):\n%s", diff)
	}

	if _, err := store.Delete(context.Background(), e.st, resource.Key{Kind: resource.HostnameGenerator, Name: "squat"}, 0); err != nil {
		t.Fatal(err)
	}
	e.eventually(sk)
	e.eventually(fk, "frontend_default_svc_80.mesh=Available", "frontend-default-svc-80.mesh=Available", "frontend.default.svc.80.mesh=Available")
}

// TestController_InternalVIPCollidesWithMeshServiceHostname checks seed
// 003's InternalVIP values against generated names: the value is listed
// with origin MeshExternalService; a name a MeshService holds stays with
// it when a newer external service claims it as a value (it does not move
// because someone wrote a resource), both sides name the other, and the
// value gets the name when the holder goes.
func TestController_InternalVIPCollidesWithMeshServiceHostname(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(generator("svc", resource.MeshService, nil, "{{ .Name }}.svc.mesh.local"))
	e.mustCreate(meshService("mongo", nil))
	e.eventually(key(resource.MeshService, "mongo"), "mongo.svc.mesh.local=Available")

	ext := externalService("mongo-ext")
	ext.Spec.(*resource.MeshExternalServiceSpec).Match = []resource.ExternalMatch{
		{Type: resource.MatchInternalVIP, Value: "mongo.svc.mesh.local", Port: 27017},
		{Type: resource.MatchInternalVIP, Value: "mongo-ro.ext.local", Port: 27018},
	}
	e.mustCreate(ext)
	mesKey := key(resource.MeshExternalService, "mongo-ext")
	e.eventually(mesKey, "mongo.svc.mesh.local=NotAvailable", "mongo-ro.ext.local=Available")
	e.eventually(key(resource.MeshService, "mongo"), "mongo.svc.mesh.local=Available")

	want := []resource.Address{
		{Hostname: "mongo.svc.mesh.local", Status: resource.AddressNotAvailable, Origin: resource.AddressOrigin{Kind: "MeshExternalService", Name: "mongo-ext"},
			Reason: `hostname "mongo.svc.mesh.local" is already taken by MeshService default/mongo (from generator svc), which has precedence`},
		{Hostname: "mongo-ro.ext.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "MeshExternalService", Name: "mongo-ext"}},
	}
	if d := cmp.Diff(want, e.get(mesKey).Status.(resource.ServiceStatusOf).Service().Addresses); d != "" {
		t.Errorf("external service addresses (-want +got):\n%s", d)
	}
	want = []resource.Address{{Hostname: "mongo.svc.mesh.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "svc"},
		Reason: "also claimed by MeshExternalService default/mongo-ext (its InternalVIP match), which does not get it"}}
	if d := cmp.Diff(want, e.get(key(resource.MeshService, "mongo")).Status.(resource.ServiceStatusOf).Service().Addresses); d != "" {
		t.Errorf("MeshService addresses (-want +got):\n%s", d)
	}

	if _, err := store.Delete(context.Background(), e.st, key(resource.MeshService, "mongo"), 0); err != nil {
		t.Fatal(err)
	}
	e.eventually(mesKey, "mongo.svc.mesh.local=Available", "mongo-ro.ext.local=Available")
}

// TestController_AddressesInPrecedenceOrder pins the order of
// status.addresses (docs/hostnames.md): the service's own names (the
// InternalVIP values of a MeshExternalService) in the order of its spec,
// then one address per generator in precedence order - created in this
// zone before synced from global, then older, then by name - a name two
// generators give listed once, under the first.
func TestController_AddressesInPrecedenceOrder(t *testing.T) {
	var tick atomic.Int64
	clock := func() time.Time { return time.Unix(1_700_000_000+tick.Add(1), 0) } // each write a second later
	e := newEnv(t, sqlite.WithClock(clock))
	synced := generator("a-synced", resource.MeshExternalService, nil, "{{ .Name }}.synced.mesh.local")
	if errs := admission.New(admission.Options{Mode: resource.ModeZone, Zone: "east"}).Admit(synced, admission.Writer{Source: admission.FromGlobal}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, err := store.Create(context.Background(), e.st, synced); err != nil { // the oldest
		t.Fatal(err)
	}
	e.mustCreate(generator("c-local-old", resource.MeshExternalService, nil, "{{ .Name }}.old.mesh.local"))
	e.mustCreate(generator("b-local-new", resource.MeshExternalService, nil, "{{ .Name }}.new.mesh.local"))
	e.mustCreate(generator("a-local-newest", resource.MeshExternalService, nil, "{{ .Name }}.old.mesh.local"))
	ext := externalService("api")
	ext.Spec.(*resource.MeshExternalServiceSpec).Match = []resource.ExternalMatch{
		{Type: resource.MatchInternalVIP, Value: "zeta.ext.local", Port: 443},
		{Type: resource.MatchInternalVIP, Value: "alpha.ext.local", Port: 444},
	}
	e.mustCreate(ext)
	k := key(resource.MeshExternalService, "api")
	e.eventually(k, "zeta.ext.local=Available", "alpha.ext.local=Available",
		"api.old.mesh.local=Available", "api.new.mesh.local=Available", "api.synced.mesh.local=Available")
	var origins []string
	for _, a := range e.get(k).Status.(resource.ServiceStatusOf).Service().Addresses {
		origins = append(origins, a.Origin.Kind+"/"+a.Origin.Name)
	}
	want := []string{"MeshExternalService/api", "MeshExternalService/api",
		"HostnameGenerator/c-local-old", "HostnameGenerator/b-local-new", "HostnameGenerator/a-synced"}
	if d := cmp.Diff(want, origins); d != "" {
		t.Errorf("origins (-want +got):\n%s", d)
	}
}

func TestController_FollowsLabelAndGeneratorChanges(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(generator("team", resource.MeshService, map[string]string{"expose": "yes"}, `{{ label "team" }}.teams.mesh.local`))
	web := e.mustCreate(meshService("web", map[string]string{"expose": "yes"}))
	k := web.Key()
	e.eventually(k, "=NotAvailable") // label "team" is missing

	web = e.get(k)
	web.Labels["team"] = "blue"
	e.update(web)
	e.eventually(k, "blue.teams.mesh.local=Available")

	// The generator stops selecting the service: its address goes.
	g := e.get(resource.Key{Kind: resource.HostnameGenerator, Name: "team"})
	g.Spec.(*resource.HostnameGeneratorSpec).Selector.MeshService.MatchLabels = map[string]string{"expose": "public"}
	e.update(g)
	e.eventually(k)
}

func TestController_KeepsOtherStatusFieldsAndSkipsEqualWrites(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(generator("svc", resource.MeshService, nil, "{{ .Name }}.mesh.local"))
	redis := e.mustCreate(meshService("redis", nil))
	e.eventually(redis.Key(), "redis.mesh.local=Available")

	// Another controller writes status.vips; the addresses must survive,
	// and the hostnames controller must not erase the VIPs.
	cur := e.get(redis.Key())
	cur.Status.(resource.ServiceStatusOf).Service().VIPs = []resource.VIP{{IP: "241.0.0.1", Type: resource.VIPKuma}}
	if _, err := store.UpdateStatus(context.Background(), e.st, cur); err != nil {
		t.Fatal(err)
	}
	e.Settle()
	before := e.get(redis.Key()).Version
	// A label change makes the core decide again; the addresses do not
	// change, so nothing is written.
	cur = e.get(redis.Key())
	cur.Labels["touch"] = "1"
	e.update(cur)
	e.Settle()
	e.eventually(redis.Key(), "redis.mesh.local=Available")
	after := e.get(redis.Key())
	vips := after.Status.(resource.ServiceStatusOf).Service().VIPs
	if len(vips) != 1 || vips[0].IP != "241.0.0.1" {
		t.Errorf("VIPs after the hostnames controller ran = %v, want the one written by the other controller", vips)
	}
	if after.Version != before+1 {
		t.Errorf("version %d -> %d: want only the label update, no status write", before, after.Version)
	}
}

func TestController_RebuildsOnRestart(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(generator("svc", resource.MeshService, nil, "{{ .Name }}.mesh.local"))
	e.mustCreate(meshService("a", nil))
	e.eventually(key(resource.MeshService, "a"), "a.mesh.local=Available")

	e.Stop()
	// While no controller runs, a second service arrives.
	e.mustCreate(meshService("b", nil))
	e.Restart()
	e.eventually(key(resource.MeshService, "b"), "b.mesh.local=Available")
	e.eventually(key(resource.MeshService, "a"), "a.mesh.local=Available")
}

func TestDefaults_ByMode(t *testing.T) {
	names := func(objs []*resource.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.Name+":"+o.Spec.(*resource.HostnameGeneratorSpec).Template+":"+o.Labels[resource.LabelOrigin])
		}
		return out
	}
	tests := []struct {
		mode string
		want []string
	}{
		{resource.ModeStandalone, []string{
			"local-universal-mesh-service:{{ .Name }}.svc.mesh.local:zone",
			"local-mesh-external-service:{{ .DisplayName }}.extsvc.mesh.local:zone",
			"local-mesh-multi-zone-service:{{ .DisplayName }}.mzsvc.mesh.local:zone",
		}},
		{resource.ModeZone, []string{
			"local-universal-mesh-service:{{ .Name }}.svc.mesh.local:zone",
			"local-mesh-external-service:{{ .DisplayName }}.extsvc.mesh.local:zone",
		}},
		{resource.ModeGlobal, []string{
			"synced-universal-mesh-service:{{ .DisplayName }}.svc.{{ .Zone }}.mesh.local:global",
			`synced-kube-mesh-service:{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local:global`,
			`synced-headless-kube-mesh-service:{{ label "statefulset.kubernetes.io/pod-name" }}.{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local:global`,
			"synced-mesh-external-service:{{ .DisplayName }}.extsvc.mesh.local:global",
			"synced-mesh-multi-zone-service:{{ .DisplayName }}.mzsvc.mesh.local:global",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			if d := cmp.Diff(tt.want, names(Defaults(tt.mode, "east"))); d != "" {
				t.Errorf("defaults (-want +got):\n%s", d)
			}
		})
	}
}

func TestEnsureDefaults_CreatesOnceAndNeverOverwrites(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := EnsureDefaults(ctx, st, resource.ModeStandalone, "east", log); err != nil {
		t.Fatal(err)
	}
	k := resource.Key{Kind: resource.HostnameGenerator, Name: "local-universal-mesh-service"}
	g, err := st.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	g.Spec.(*resource.HostnameGeneratorSpec).Template = "{{ .Name }}.custom.local"
	if _, err := store.Update(ctx, st, g); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDefaults(ctx, st, resource.ModeStandalone, "east", log); err != nil {
		t.Fatal(err)
	}
	g, _ = st.Get(ctx, k)
	if tmpl := g.Spec.(*resource.HostnameGeneratorSpec).Template; tmpl != "{{ .Name }}.custom.local" {
		t.Errorf("EnsureDefaults overwrote an operator's change: template %q", tmpl)
	}
}

// A default generator created by an earlier version with the template it
// had then is brought to today's; one an operator changed is not.
func TestEnsureDefaults_UpgradesFormerTemplates(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	k := resource.Key{Kind: resource.HostnameGenerator, Name: "local-universal-mesh-service"}
	for _, tc := range []struct {
		name, stored, want string
		labels             map[string]string
	}{
		{"Former", "{{ .DisplayName }}.svc.mesh.local", "{{ .Name }}.svc.mesh.local", nil},
		{"FormerButRelabelled", "{{ .DisplayName }}.svc.mesh.local", "{{ .DisplayName }}.svc.mesh.local", map[string]string{"team": "ops"}},
		{"Changed", "{{ .Name }}.custom.local", "{{ .Name }}.custom.local", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := sqlite.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var g *resource.Object
			for _, d := range Defaults(resource.ModeStandalone, "east") {
				if d.Name == k.Name {
					g = d
				}
			}
			g.Spec.(*resource.HostnameGeneratorSpec).Template = tc.stored
			for lk, lv := range tc.labels {
				g.Labels[lk] = lv
			}
			if _, err := store.Create(ctx, st, g); err != nil {
				t.Fatal(err)
			}
			if err := EnsureDefaults(ctx, st, resource.ModeStandalone, "east", log); err != nil {
				t.Fatal(err)
			}
			got, err := st.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if tmpl := got.Spec.(*resource.HostnameGeneratorSpec).Template; tmpl != tc.want {
				t.Errorf("template %q, want %q", tmpl, tc.want)
			}
		})
	}
}
