package meshservices

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/reconcile/reconciletest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a runner of the core and its cache on a real embedded store,
// with a fake clock for the grace period.
type env struct {
	t     *testing.T
	st    store.Store
	clock *clock
	rt    *reconciletest.Env
	// core, when set, is the core of every term; else each term has a new one.
	core *Core
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, clock: &clock{t: t0}}
	st, err := sqlite.Open(t.TempDir(), sqlite.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	e.st = st
	e.put(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}})
	e.start()
	t.Cleanup(func() { e.stop(); st.Close() })
	return e
}

// start runs a cache and a runner of the core, as a new leader would.
func (e *env) start() {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.rt = reconciletest.Start(e.t, e.st, reconciletest.Options{Now: e.clock.Now, Log: log, Cores: func() []reconcile.Core {
		if e.core != nil {
			return []reconcile.Core{e.core}
		}
		return []reconcile.Core{New(CoreOptions{Options: opts, Log: log, Registerer: prometheus.NewRegistry()})}
	}})
}

func (e *env) stop() { e.rt.Stop() }

func (e *env) restart() { e.stop(); e.start() }

// put creates or replaces obj.
func (e *env) put(obj *resource.Object) {
	e.t.Helper()
	ctx := context.Background()
	cur, err := e.st.Get(ctx, obj.Key())
	switch {
	case errors.Is(err, store.ErrNotFound):
		_, err = store.Create(ctx, e.st, obj)
	case err == nil:
		obj.Version = cur.Version
		_, err = e.st.Apply(ctx, store.Op{Type: store.OpUpdate, Object: obj})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) remove(k resource.Key) {
	e.t.Helper()
	if _, err := e.st.Apply(context.Background(), store.Op{Type: store.OpDelete, Key: k}); err != nil {
		e.t.Fatal(err)
	}
}

func msKey(name string) resource.Key {
	return resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name}
}

// eventually polls the store until check passes.
func (e *env) eventually(what string, check func(ms *resource.Object) bool, name string) *resource.Object {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ms, err := e.st.Get(context.Background(), msKey(name))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			e.t.Fatal(err)
		}
		if err != nil {
			ms = nil
		}
		if check(ms) {
			return ms
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("MeshService %s: %s did not happen; it is %+v", name, what, ms)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func exists(ms *resource.Object) bool { return ms != nil }
func gone(ms *resource.Object) bool   { return ms == nil }

func pendingDeletion(ms *resource.Object) bool {
	if ms == nil {
		return false
	}
	_, ok := ms.Labels[LabelDeletionStarted]
	return ok
}

func TestController_Lifecycle(t *testing.T) {
	e := newEnv(t)
	dp1 := dataplane("dp-1", 0, inbound{8080, "frontend_default_svc_80", "http"})
	e.put(dp1)
	ms := e.eventually("creation", exists, "frontend-default-svc-80")
	if !Managed(ms) || identityTag(ms) != "frontend_default_svc_80" || ms.Labels[resource.LabelDisplayName] != "frontend-default-svc-80" {
		t.Errorf("created %+v", ms)
	}

	// A second Dataplane that disagrees: a condition names it.
	e.put(dataplane("dp-2", 0, inbound{9090, "frontend_default_svc_80", "http"}))
	e.eventually("port condition", func(ms *resource.Object) bool {
		st, ok := ms.Status.(*resource.ServiceStatus)
		return ok && len(st.Conditions) == 1 && st.Conditions[0].Type == resource.ConditionPortsConsistent
	}, "frontend-default-svc-80")
	e.remove(resource.Key{Kind: resource.Dataplane, Mesh: "default", Name: "dp-2"})
	e.eventually("condition cleared", func(ms *resource.Object) bool {
		st, ok := ms.Status.(*resource.ServiceStatus)
		return ok && len(st.Conditions) == 0
	}, "frontend-default-svc-80")

	// The last Dataplane goes: the grace period starts, and survives
	// restarts without starting over.
	e.remove(dp1.Key())
	ms = e.eventually("grace label", pendingDeletion, "frontend-default-svc-80")
	if got := ms.Labels[LabelDeletionStarted]; got != formatStarted(t0) {
		t.Errorf("grace started %q, want %q", got, formatStarted(t0))
	}
	e.clock.Advance(59 * time.Minute)
	e.restart()
	e.rt.Settle()
	e.eventually("kept during the period", func(ms *resource.Object) bool {
		return ms != nil && ms.Labels[LabelDeletionStarted] == formatStarted(t0)
	}, "frontend-default-svc-80")

	// A Dataplane returns: the label goes.
	e.put(dataplane("dp-1", 0, inbound{8080, "frontend_default_svc_80", "http"}))
	e.eventually("grace ended", func(ms *resource.Object) bool { return ms != nil && !pendingDeletion(ms) }, "frontend-default-svc-80")

	// It goes again, and the period ends while no controller runs.
	e.remove(dp1.Key())
	e.eventually("grace label again", pendingDeletion, "frontend-default-svc-80")
	e.stop()
	e.clock.Advance(time.Hour)
	e.start()
	e.eventually("deletion", gone, "frontend-default-svc-80")
}

func TestController_OperatorOwned(t *testing.T) {
	e := newEnv(t)
	own := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "web", Labels: map[string]string{"team": "payments"},
		Spec: &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 1234, AppProtocol: "tcp"}}}}
	e.put(own)
	e.put(dataplane("dp-1", 0, inbound{80, "web", ""}))
	e.put(dataplane("dp-2", 0, inbound{81, "other", ""}))
	e.eventually("the other tag's service", exists, "other")
	ms, err := e.st.Get(context.Background(), msKey("web"))
	if err != nil || ms.Version != 1 || ms.Spec.(*resource.MeshServiceSpec).Ports[0].Port != 1234 || Managed(ms) {
		t.Errorf("the operator's MeshService was touched: %+v, %v", ms, err)
	}
	// Once the operator deletes theirs, the tag gets its service.
	e.remove(msKey("web"))
	e.eventually("the tag's service", func(ms *resource.Object) bool { return ms != nil && Managed(ms) }, "web")
}

// The same core leads again after losing leadership (the runner starts
// it once per term): its gauges count what is, not twice.
func TestController_GaugesAcrossTerms(t *testing.T) {
	e := newEnv(t)
	e.stop() // the env's own runner
	e.put(&resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "web", Spec: &resource.MeshServiceSpec{}})
	e.put(dataplane("dp-1", 0, inbound{80, "web", ""}))
	e.core = New(CoreOptions{Options: opts, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: prometheus.NewRegistry()})
	for term := 1; term <= 2; term++ {
		e.start()
		e.rt.Settle()
		if got := testutil.ToFloat64(e.core.blocked); got != 1 {
			t.Errorf("term %d: blocked gauge %v, want 1", term, got)
		}
		e.stop()
	}
}
