package hostnames

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

type env struct {
	t     *testing.T
	st    store.Store
	cache *cache.Cache
	ctl   *Controller
	stop  func()
	// settled is closed when the controller reports it has settled.
	settled chan struct{}
	// batch is the controller's BatchSize; 0 for the default.
	batch int
	// fence, when set, fences the controller's writes, as a leader's are;
	// fenced counts the writes it refused.
	fence  *store.Fence
	fenced atomic.Int64
}

// fenceCounter counts the writes the fence refused.
type fenceCounter struct {
	store.Store
	n *atomic.Int64
}

func (s fenceCounter) Apply(ctx context.Context, ops ...store.Op) ([]store.Result, error) {
	rs, err := s.Store.Apply(ctx, ops...)
	if errors.Is(err, store.ErrFenced) {
		s.n.Add(1)
	}
	return rs, err
}

// newEnv runs the controller over a real embedded store and cache.
func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st}
	e.mustCreate(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}})
	e.start()
	return e
}

func (e *env) start() {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.cache = cache.New(e.st, log, nil)
	settled := make(chan struct{})
	e.settled = settled
	e.ctl = New(Options{Cache: e.cache, Store: fenceCounter{e.st, &e.fenced}, Zone: "east", Log: log, Registerer: prometheus.NewRegistry(),
		BatchSize: e.batch, Settled: func() { close(settled) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { e.cache.Run(ctx); done <- struct{}{} }()
	lead := ctx
	if e.fence != nil {
		lead = store.WithFence(ctx, *e.fence)
	}
	go func() { e.ctl.Run(lead); done <- struct{}{} }()
	var once sync.Once
	e.stop = func() { once.Do(func() { cancel(); <-done; <-done }) }
	e.t.Cleanup(e.stop)
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

// The first pass writes in batches as they fill, the last one partial,
// and writes each service once.
func TestController_WritesInBatches(t *testing.T) {
	e := newEnv(t)
	e.stop()
	e.mustCreate(generator("gen", resource.MeshService, nil, "{{ .Name }}.mesh.local"))
	const n = 7
	for i := range n {
		e.mustCreate(meshService(fmt.Sprintf("s%d", i), nil))
	}
	e.batch = 2
	e.start()
	for i := range n {
		e.eventually(key(resource.MeshService, fmt.Sprintf("s%d", i)), fmt.Sprintf("s%d.mesh.local=Available", i))
	}
	<-e.settled
	if got := testutil.ToFloat64(e.ctl.writes.WithLabelValues("ok")); got != n {
		t.Errorf("%v status writes, want %d", got, n)
	}
}

// A deposed leader stops its pass at the first write the fence refuses
// instead of trying every remaining batch.
func TestController_FencedPassStops(t *testing.T) {
	e := newEnv(t)
	e.stop()
	rs, err := e.st.Apply(context.Background(), store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: "leader",
		Value: store.Fence{Lease: "leader", Holder: "b", Term: 2}.LeaseValue(), ExpiresAt: time.Now().Add(time.Hour)}})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	e.mustCreate(generator("gen", resource.MeshService, nil, "{{ .Name }}.mesh.local"))
	for i := range 7 {
		e.mustCreate(meshService(fmt.Sprintf("s%d", i), nil))
	}
	e.fence = &store.Fence{Lease: "leader", Holder: "a", Term: 1}
	e.batch = 2
	e.start()
	deadline := time.Now().Add(5 * time.Second)
	for e.fenced.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the rest of the pass, if it went on
	// Two passes run: the first one, and one over the keys the cache's
	// first list queued. Each must stop at its first batch (of 4).
	if n := e.fenced.Load(); n == 0 || n > 2 {
		t.Errorf("%d fenced writes, want 1 or 2: one per pass", n)
	}
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

// TestController_InternalVIPCollidesWithMeshServiceHostname checks seed
// 003's InternalVIP values against generated names: the value is listed
// with origin MeshExternalService, wins over the generated name even though
// the external service is newer, both sides name the other, and removing
// the value gives the name back.
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
	e.eventually(mesKey, "mongo.svc.mesh.local=Available", "mongo-ro.ext.local=Available")
	e.eventually(key(resource.MeshService, "mongo"), "mongo.svc.mesh.local=NotAvailable")

	want := []resource.Address{
		{Hostname: "mongo.svc.mesh.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "MeshExternalService", Name: "mongo-ext"},
			Reason: "also claimed by MeshService default/mongo (from generator svc), which does not get it"},
		{Hostname: "mongo-ro.ext.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "MeshExternalService", Name: "mongo-ext"}},
	}
	if d := cmp.Diff(want, e.get(mesKey).Status.(resource.ServiceStatusOf).Service().Addresses); d != "" {
		t.Errorf("external service addresses (-want +got):\n%s", d)
	}
	want = []resource.Address{{Hostname: "mongo.svc.mesh.local", Status: resource.AddressNotAvailable, Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "svc"},
		Reason: `hostname "mongo.svc.mesh.local" is already taken by MeshExternalService default/mongo-ext (its InternalVIP match), which has precedence`}}
	if d := cmp.Diff(want, e.get(key(resource.MeshService, "mongo")).Status.(resource.ServiceStatusOf).Service().Addresses); d != "" {
		t.Errorf("MeshService addresses (-want +got):\n%s", d)
	}

	cur := e.get(mesKey)
	cur.Spec.(*resource.MeshExternalServiceSpec).Match = cur.Spec.(*resource.MeshExternalServiceSpec).Match[1:]
	e.update(cur)
	e.eventually(mesKey, "mongo-ro.ext.local=Available")
	e.eventually(key(resource.MeshService, "mongo"), "mongo.svc.mesh.local=Available")
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
	// A label change makes the controller write again.
	cur = e.get(redis.Key())
	cur.Labels["touch"] = "1"
	e.update(cur)
	time.Sleep(100 * time.Millisecond)
	e.eventually(redis.Key(), "redis.mesh.local=Available")
	vips := e.get(redis.Key()).Status.(resource.ServiceStatusOf).Service().VIPs
	if len(vips) != 1 || vips[0].IP != "241.0.0.1" {
		t.Errorf("VIPs after the hostnames controller ran = %v, want the one written by the other controller", vips)
	}
	// That label change did not change the addresses: nothing was written.
	if n := testutil.ToFloat64(e.ctl.writes.WithLabelValues("ok")); n != 1 {
		t.Errorf("status writes = %v, want 1 (the first naming only)", n)
	}
}

func TestController_RebuildsOnRestart(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(generator("svc", resource.MeshService, nil, "{{ .Name }}.mesh.local"))
	e.mustCreate(meshService("a", nil))
	e.eventually(key(resource.MeshService, "a"), "a.mesh.local=Available")

	e.stop()
	// While no controller runs, a second service arrives.
	e.mustCreate(meshService("b", nil))
	e.start()
	e.eventually(key(resource.MeshService, "b"), "b.mesh.local=Available")
	e.eventually(key(resource.MeshService, "a"), "a.mesh.local=Available")
}

// TestController_ForgetsWritesOnceEchoed checks that the controller keeps
// what it wrote only while the echo is on the way: once a full pass over
// many services has been written and echoed, nothing is held
// (reconcile.Inflight's own test checks that its map is given back).
func TestController_ForgetsWritesOnceEchoed(t *testing.T) {
	e := newEnv(t)
	e.stop()
	e.mustCreate(generator("svc", resource.MeshService, nil, "{{ .Name }}.mesh.local"))
	const n = 200 // a full pass well past Inflight's shrinking threshold
	for i := range n {
		e.mustCreate(meshService(fmt.Sprintf("s%03d", i), nil))
	}
	e.start()
	select {
	case <-e.settled:
	case <-time.After(30 * time.Second):
		t.Fatal("the controller did not settle")
	}
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		e.eventually(key(resource.MeshService, name), name+".mesh.local=Available")
	}
	e.stop()
	if got := testutil.ToFloat64(e.ctl.writes.WithLabelValues("ok")); got != n {
		t.Errorf("status writes = %v, want %d (one per service)", got, n)
	}
	if e.ctl.written.Len() != 0 {
		t.Errorf("after the echoes the controller holds %d writes, want none", e.ctl.written.Len())
	}
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
			"local-universal-mesh-service:{{ .DisplayName }}.svc.mesh.local:zone",
			"local-mesh-external-service:{{ .DisplayName }}.extsvc.mesh.local:zone",
			"local-mesh-multi-zone-service:{{ .DisplayName }}.mzsvc.mesh.local:zone",
		}},
		{resource.ModeZone, []string{
			"local-universal-mesh-service:{{ .DisplayName }}.svc.mesh.local:zone",
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

// While a write's echo is on the way, the controller compares with what
// it wrote (kept as a digest), not with the cache's older copy; once the
// cache shows the write, with the cache.
func TestController_ComparesWithWriteInFlight(t *testing.T) {
	c := New(Options{})
	k := key(resource.MeshService, "web")
	addr := func(host string) []resource.Address {
		return []resource.Address{{Hostname: host, Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: OriginKind, Name: "gen"}}}
	}
	a, b := addr("a.mesh.local"), addr("b.mesh.local")
	obj := func(rev int64, addrs []resource.Address) *resource.Object {
		o := meshService("web", nil)
		o.Revision = rev
		st := resource.MustLookup(o.Kind).NewStatus().(resource.ServiceStatusOf)
		st.Service().Addresses = addrs
		o.Status = st
		return o
	}
	if same, _ := c.unchanged(k, obj(5, a), a); !same {
		t.Error("equal to the cache's copy, nothing in flight: not unchanged")
	}
	same, sum := c.unchanged(k, obj(5, a), b)
	if same {
		t.Fatal("different from the cache's copy: unchanged")
	}
	c.written.Put(k, sum)
	c.written.Written(k, 7)
	if same, _ := c.unchanged(k, obj(5, a), b); !same {
		t.Error("equal to the write in flight: not unchanged")
	}
	if same, _ := c.unchanged(k, obj(5, a), a); same {
		t.Error("equal to the cache's older copy but not to the write in flight: unchanged")
	}
	if same, _ := c.unchanged(k, obj(7, b), b); !same || c.written.Len() != 0 {
		t.Errorf("the echo shows the write: unchanged %v, %d writes still in flight", same, c.written.Len())
	}
}
