package mzservice

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshnames/meshnames/internal/hostnames"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/reconcile/reconciletest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/vips"
)

// syncLog is a log sink safe for the runner's goroutine.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type ctlEnv struct {
	*reconciletest.Env
	t    *testing.T
	st   store.Store
	core *Core
}

// newCtlEnv runs the core in a runner over a real embedded store and
// cache, beside the hostnames and VIP cores that write the other parts of
// a MeshMultiZoneService's status, as in a zone control plane "east".
func newCtlEnv(t *testing.T) *ctlEnv {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &ctlEnv{t: t, st: st}
	for _, m := range []string{"default", "other"} {
		e.create(&resource.Object{Kind: resource.Mesh, Name: m, Spec: &resource.MeshSpec{}})
	}
	e.create(&resource.Object{Kind: resource.HostnameGenerator, Name: "mzsvc", Spec: &resource.HostnameGeneratorSpec{
		Template: "{{ .DisplayName }}.mzsvc.mesh.local",
		Selector: resource.HostnameSelector{MeshMultiZoneService: &resource.LabelSelector{}},
	}})
	var logs syncLog
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- log of the runner and cores:\n%s", logs.String())
		}
	})
	pool := func(p string) vips.Prefixes { return vips.Prefixes{V4: netip.MustParsePrefix(p)} }
	e.Env = reconciletest.Start(t, st, reconciletest.Options{Log: log, Cores: func() []reconcile.Core {
		e.core = New(Options{Zone: "east", Log: log, Registerer: prometheus.NewRegistry()})
		return []reconcile.Core{
			hostnames.New(hostnames.Options{Zone: "east", Log: log}),
			vips.New(vips.Options{Log: log, Quarantine: time.Minute, Pools: map[resource.Kind]vips.Prefixes{
				resource.MeshService: pool("241.0.0.0/8"), resource.MeshExternalService: pool("242.0.0.0/8"), resource.MeshMultiZoneService: pool("243.0.0.0/8"),
			}}),
			e.core,
		}
	}})
	return e
}

func (e *ctlEnv) create(o *resource.Object) {
	e.t.Helper()
	o.Spec.Default()
	if _, err := store.Create(context.Background(), e.st, o); err != nil {
		e.t.Fatal(err)
	}
}

// put creates o, or replaces the labels and spec of the stored one,
// retrying when a status write of the runner got in between.
func (e *ctlEnv) put(o *resource.Object) {
	e.t.Helper()
	o.Spec.Default()
	for attempt := 0; ; attempt++ {
		cur, err := e.st.Get(context.Background(), o.Key())
		if errors.Is(err, store.ErrNotFound) {
			_, err = store.Create(context.Background(), e.st, o)
		} else if err == nil {
			cur.Labels, cur.Spec = o.Labels, o.Spec
			_, err = store.Update(context.Background(), e.st, cur)
		}
		if errors.Is(err, store.ErrConflict) && attempt < 10 {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return
	}
}

func (e *ctlEnv) delete(k resource.Key) {
	e.t.Helper()
	if _, err := store.Delete(context.Background(), e.st, k, 0); err != nil {
		e.t.Fatal(err)
	}
}

func (e *ctlEnv) get(k resource.Key) *resource.Object {
	e.t.Helper()
	o, err := e.st.Get(context.Background(), k)
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

// owned returns what the store holds of the parts the core owns of k's
// status.
func (e *ctlEnv) owned(k resource.Key) Result {
	e.t.Helper()
	st, _ := e.get(k).Status.(*resource.MultiZoneServiceStatus)
	if st == nil {
		return Result{}
	}
	r := Result{MeshServices: st.MeshServices, Zones: st.Zones, Ports: st.Ports}
	for _, c := range st.Conditions {
		if c.Type == resource.ConditionMeshServicesMatched || c.Type == resource.ConditionPortsConsistent {
			r.Conditions = append(r.Conditions, c)
		}
	}
	return r
}

// waitStatus polls the store until the parts the core owns of k's status
// equal want. (It does not wait for the runner to settle: a change the
// runner takes in the instant before it records the cache's revision can
// leave it idle without reporting that it settled.)
func (e *ctlEnv) waitStatus(k resource.Key, want Result) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got Result
	for time.Now().Before(deadline) {
		if got = e.owned(k); cmp.Equal(want, got, cmpopts.EquateEmpty()) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("status of %s (-want +got):\n%s", k, cmp.Diff(want, got, cmpopts.EquateEmpty()))
}

// synced returns a MeshService as a zone stores one synced from zone:
// renamed, with the original's display name and namespace.
func synced(name, display, zone string, labels map[string]string, ports ...string) *resource.Object {
	l := map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelZone: zone, resource.LabelDisplayName: display, resource.LabelMesh: "default"}
	for k, v := range labels {
		l[k] = v
	}
	return ms("default", name, l, ports...)
}

func TestController_StatusFollowsServices(t *testing.T) {
	e := newCtlEnv(t)
	redis := map[string]string{lSvc: "redis", lNS: "db"}
	e.put(ms("default", "redis", zl("east", lSvc+"=redis", lNS+"=db", lDN+"=redis"), "6379/tcp/main", "9121/http"))
	e.put(synced("redis-7f2c9", "redis", "west", redis, "6379/tcp/main"))
	e.put(synced("redis-88d1a", "redis", "south", map[string]string{lSvc: "redis", lNS: "db"}, "6379/tcp/main", "9121/http"))
	e.put(ms("other", "redis", zl("east", lSvc+"=redis", lNS+"=db"), "6379/tcp"))
	e.put(mz("default", "redis", map[string]string{lSvc: "redis"}))
	k := mzKey("default", "redis")

	want := Result{
		MeshServices: []resource.MeshServiceRef{ref("redis", "db", "east", "default"), ref("redis", "db", "south", "default"), ref("redis", "db", "west", "default")},
		Zones:        zones("east", "south", "west"),
		Ports:        ports("6379/tcp/main"),
		Conditions:   []resource.Condition{matched("default", 3), portsDiffer("9121/http is not on redis-7f2c9 (zone west)")},
	}
	e.waitStatus(k, want)
	// The other cores' parts are in the same status: one write carries all.
	st := e.get(k).Status.(*resource.MultiZoneServiceStatus)
	if len(st.VIPs) != 1 || len(st.Addresses) != 1 || st.Addresses[0].Hostname != "redis.mzsvc.mesh.local" {
		t.Errorf("status lacks the hostnames and VIP parts: addresses %+v, vips %+v", st.Addresses, st.VIPs)
	}

	// The west service gains the port: nothing is left out.
	e.put(synced("redis-7f2c9", "redis", "west", redis, "6379/tcp/main", "9121/http"))
	want.Ports = ports("6379/tcp/main", "9121/http")
	want.Conditions = []resource.Condition{matched("default", 3)}
	e.waitStatus(k, want)

	// Relabelled away, then deleted: the match follows.
	e.put(synced("redis-7f2c9", "redis", "west", map[string]string{lSvc: "redis-old"}, "6379/tcp/main", "9121/http"))
	e.delete(msKey("default", "redis-88d1a"))
	want = Result{
		MeshServices: []resource.MeshServiceRef{ref("redis", "db", "east", "default")},
		Zones:        zones("east"),
		Ports:        ports("6379/tcp/main", "9121/http"),
		Conditions:   []resource.Condition{matched("default", 1)},
	}
	e.waitStatus(k, want)

	// Declared ports win; a selector matching nothing says so.
	e.put(mz("default", "redis", map[string]string{lSvc: "none"}, "7000/tcp"))
	want = Result{Ports: ports("7000/tcp"), Conditions: []resource.Condition{
		noMatch("no MeshService of mesh default matches the selector {k8s.kuma.io/service-name=none}"),
	}}
	e.waitStatus(k, want)
	if n := testutil.ToFloat64(e.core.sizes.WithLabelValues("meshservices")); n != 3 {
		t.Errorf("meshservices gauge = %v, want 3", n)
	}
}

// TestController_WritesOnlyChangesAndKeepsOtherConditions checks that a
// change no status shows writes nothing, and that the core replaces only
// its own conditions.
func TestController_WritesOnlyChangesAndKeepsOtherConditions(t *testing.T) {
	e := newCtlEnv(t)
	e.put(ms("default", "a", zl("east", "app=x"), "80/http"))
	e.put(mz("default", "x", map[string]string{"app": "x"}))
	// probe's status shows when the runner has processed what came before
	// a change to it: it takes changes in the order of the store.
	e.put(mz("default", "probe", map[string]string{"app": "probe"}))
	k, probe := mzKey("default", "x"), mzKey("default", "probe")
	want := Result{
		MeshServices: []resource.MeshServiceRef{ref("a", "", "east", "default")},
		Zones:        zones("east"), Ports: ports("80/http"),
		Conditions: []resource.Condition{matched("default", 1)},
	}
	e.waitStatus(k, want)
	e.waitStatus(probe, Result{Conditions: []resource.Condition{
		noMatch("no MeshService of mesh default matches the selector {app=probe}"),
	}})

	// Someone else's condition, written as a patch of its own.
	cur := e.get(k)
	other := resource.Condition{Type: "Other", Status: resource.ConditionTrue, Reason: "Because"}
	cur.Status.(*resource.MultiZoneServiceStatus).Conditions = []resource.Condition{other}
	if rs, err := e.st.Apply(context.Background(), store.Op{Type: store.OpPatchStatus, Object: cur,
		Patch: &store.StatusPatch{Conditions: []string{"Other"}}}); err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	before := e.get(k)

	// A label of a matched service that no status shows: no write, neither
	// for it nor for the other condition's write.
	e.put(ms("default", "a", zl("east", "app=x", "team=t"), "80/http"))
	e.put(ms("default", "p", zl("east", "app=probe")))
	e.waitStatus(probe, Result{
		MeshServices: []resource.MeshServiceRef{ref("p", "", "east", "default")},
		Zones:        zones("east"),
		Conditions:   []resource.Condition{matched("default", 1)},
	})
	if got := e.get(k); got.Version != before.Version {
		t.Errorf("version %d -> %d: a change no status shows wrote the status", before.Version, got.Version)
	}

	// A second match: written, and the other condition stays.
	e.put(ms("default", "b", zl("west", "app=x"), "80/http"))
	want.MeshServices = append(want.MeshServices, ref("b", "", "west", "default"))
	want.Zones = zones("east", "west")
	want.Conditions = []resource.Condition{matched("default", 2)}
	e.waitStatus(k, want)
	conds := e.get(k).Status.(*resource.MultiZoneServiceStatus).Conditions
	if len(conds) != 2 || conds[0] != other {
		t.Errorf("conditions = %+v, want the other one first, then MeshServicesMatched", conds)
	}
}

// TestController_RebuildsOnRestart checks that a new term (a restart or a
// new leader) rebuilds the state from the store, sees what changed while
// no controller ran, and rewrites nothing that is right.
func TestController_RebuildsOnRestart(t *testing.T) {
	e := newCtlEnv(t)
	e.put(ms("default", "a", zl("east", "app=x"), "80/http"))
	e.put(mz("default", "x", map[string]string{"app": "x"}))
	e.put(mz("default", "y", map[string]string{"app": "y"}))
	ky := mzKey("default", "y")
	e.waitStatus(ky, Result{Conditions: []resource.Condition{
		noMatch("no MeshService of mesh default matches the selector {app=y}"),
	}})

	e.Stop()
	e.put(ms("default", "b", zl("east", "app=y"), "80/http"))
	before := e.get(mzKey("default", "x")).Version
	e.Restart()
	want := Result{
		MeshServices: []resource.MeshServiceRef{ref("b", "", "east", "default")},
		Zones:        zones("east"), Ports: ports("80/http"),
		Conditions: []resource.Condition{matched("default", 1)},
	}
	// The first pass decides every MeshMultiZoneService, x before y, and
	// writes them in one batch: once y shows, a write of x would too.
	e.waitStatus(ky, want)
	if v := e.get(mzKey("default", "x")).Version; v != before {
		t.Errorf("a status that was right was written again after the restart: version %d -> %d", before, v)
	}
}
