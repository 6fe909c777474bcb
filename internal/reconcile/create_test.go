package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/reconcile/reconciletest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Create stores a new service with the status every core decides for it:
// one write (version 1), which the runner then recognises as its own and
// does not decide again; a taken key and a kind no core decides are
// refused per resource, the others of the request written.
func TestRunner_CreateWritesOnceWithStatus(t *testing.T) {
	a, b := newLabelCore("A", "a"), newLabelCore("B", "b")
	e := newEnv(t, reconciletest.Options{Cores: func() []reconcile.Core { return []reconcile.Core{a, b} }})
	e.create(service("taken", map[string]string{"a": "old"}))
	e.rt.Settle()
	decided := a.decided

	objs := creations(
		service("s0", map[string]string{"a": "x0", "b": "y0"}),
		service("taken", map[string]string{"a": "new"}),
		&resource.Object{Kind: resource.Mesh, Name: "other", Spec: &resource.MeshSpec{}},
		service("s1", map[string]string{"a": "x1"}),
	)
	rs, ok, err := e.rt.Runner.Create(context.Background(), objs)
	if err != nil || !ok {
		t.Fatalf("Create: ok %v, err %v", ok, err)
	}
	if len(rs) != len(objs) {
		t.Fatalf("%d results for %d resources", len(rs), len(objs))
	}
	if rs[0].Err != nil || rs[3].Err != nil {
		t.Errorf("s0, s1 not created: %v, %v", rs[0].Err, rs[3].Err)
	}
	if !errors.Is(rs[1].Err, store.ErrAlreadyExists) {
		t.Errorf("the taken key: %v, want ErrAlreadyExists", rs[1].Err)
	}
	if rs[2].Err == nil {
		t.Error("a Mesh (no core decides its status) was taken by Create")
	}
	e.rt.SettleAt(rs[3].Revision)
	for name, want := range map[string]map[string]string{
		"s0": {"A": "x0", "B": "y0"},
		"s1": {"A": "x1"},
	} {
		o := e.get(name)
		if got := conditions(o); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s conditions = %v, want %v", name, got, want)
		}
		if o.Version != 1 {
			t.Errorf("%s at version %d, want 1: created with its status, nothing after", name, o.Version)
		}
	}
	if got := conditions(e.get("taken")); got["A"] != "old" {
		t.Errorf("the taken service's condition = %v, want its own (old)", got)
	}
	a.mu.Lock()
	observed, decidedNow := a.observed[svcKey("s0")], a.decided-decided
	a.mu.Unlock()
	if observed != 1 {
		t.Errorf("core observed s0 %d times, want 1: the create's change event is the runner's own", observed)
	}
	if decidedNow != 2 {
		t.Errorf("core decided %d services, want 2 (s0 and s1)", decidedNow)
	}
	if e.get("s0").Revision != rs[0].Revision {
		t.Errorf("s0 at revision %d, Create reported %d", e.get("s0").Revision, rs[0].Revision)
	}

	// Later changes are decided as for any service.
	e.setLabel("s1", "b", "later")
	if got := conditions(e.get("s1")); got["B"] != "later" || got["A"] != "x1" {
		t.Errorf("s1 conditions after a label change = %v", got)
	}
}

// Concurrent Creates are all answered, each resource written once.
func TestRunner_CreateConcurrent(t *testing.T) {
	c := newLabelCore("A", "a")
	e := newEnv(t, reconciletest.Options{BatchSize: 3, Cores: func() []reconcile.Core { return []reconcile.Core{c} }})
	e.rt.Settle()
	const callers, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	var last int64
	var mu sync.Mutex
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var objs []store.Creation
			for i := range each {
				objs = append(objs, store.Creation{Object: service(fmt.Sprintf("g%d-%d", g, i), map[string]string{"a": fmt.Sprint(g, i)})})
			}
			rs, ok, err := e.rt.Runner.Create(context.Background(), objs)
			if err != nil || !ok {
				errs <- fmt.Errorf("caller %d: ok %v, err %v", g, ok, err)
				return
			}
			for _, r := range rs {
				if r.Err != nil {
					errs <- r.Err
				}
				mu.Lock()
				last = max(last, r.Revision)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	e.rt.SettleAt(last)
	for g := range callers {
		for i := range each {
			o := e.get(fmt.Sprintf("g%d-%d", g, i))
			if got := conditions(o)["A"]; got != fmt.Sprint(g, i) || o.Version != 1 {
				t.Errorf("%s: condition %q at version %d, want %q at 1", o.Name, got, o.Version, fmt.Sprint(g, i))
			}
		}
	}
}

// Without a running term Create writes nothing and says so, so that the
// caller writes itself: before Run, and once the runner stopped.
func TestRunner_CreateWithoutTerm(t *testing.T) {
	c := newLabelCore("A", "a")
	e := newEnv(t, reconciletest.Options{Cores: func() []reconcile.Core { return []reconcile.Core{c} }})
	e.rt.Settle()
	e.rt.Stop()
	<-e.rt.Stopped()
	for _, r := range []*reconcile.Runner{e.rt.Runner, reconcile.NewRunner(reconcile.Options{Cache: e.rt.Cache, Store: e.st}, c)} {
		rs, ok, err := r.Create(context.Background(), creations(service("s", nil)))
		if ok || err != nil || rs != nil {
			t.Errorf("Create without a term: %v, ok %v, err %v; want nothing", rs, ok, err)
		}
	}
	if _, err := e.st.Get(context.Background(), svcKey("s")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("s stored without a term: %v", err)
	}
	if !e.rt.Runner.Decides(resource.MeshService) || e.rt.Runner.Decides(resource.Mesh) {
		t.Error("Decides: want MeshService only")
	}
}

func creations(objs ...*resource.Object) []store.Creation {
	out := make([]store.Creation, len(objs))
	for i, o := range objs {
		out[i] = store.Creation{Object: o}
	}
	return out
}

// A term that finds another instance leading as it writes creates writes
// none of them and says so (ok false), so that the caller writes them
// itself, as on an instance that does not lead.
func TestRunner_CreateFenced(t *testing.T) {
	e := newEnv(t, reconciletest.Options{})
	lease := func(holder string, term int64) {
		t.Helper()
		rs, err := e.st.Apply(context.Background(), store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: "leader",
			Value: store.Fence{Lease: "leader", Holder: holder, Term: term}.LeaseValue(), ExpiresAt: time.Now().Add(time.Hour)}})
		if err != nil || rs[0].Err != nil {
			t.Fatal(err, rs)
		}
	}
	lease("a", 1)
	c := newLabelCore("A", "a")
	rt := reconciletest.Start(t, e.st, reconciletest.Options{Fence: &store.Fence{Lease: "leader", Holder: "a", Term: 1},
		Cores: func() []reconcile.Core { return []reconcile.Core{c} }})
	rt.Settle()
	lease("b", 2)
	rs, ok, err := rt.Runner.Create(context.Background(), creations(service("s", map[string]string{"a": "v"})))
	if ok || err != nil || rs != nil {
		t.Errorf("Create on a deposed leader: %v, ok %v, err %v; want nothing", rs, ok, err)
	}
	if _, err := e.st.Get(context.Background(), svcKey("s")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("s stored by a deposed leader: %v", err)
	}
	if n := rt.Fenced.Load(); n != 1 {
		t.Errorf("%d fenced batches, want 1", n)
	}
}

// Named closes once the first pass has written the status of everything
// stored when the term started, and not before (a zone sends the global
// its services after it).
func TestRunner_NamedAfterFirstPass(t *testing.T) {
	e := newEnv(t, reconciletest.Options{})
	const n = 20
	for i := range n {
		e.create(service(fmt.Sprintf("s%d", i), map[string]string{"a": fmt.Sprintf("v%d", i)}))
	}
	started, release := make(chan struct{}), make(chan struct{})
	e.rt = reconciletest.Start(t, e.st, reconciletest.Options{
		Cores: func() []reconcile.Core { return []reconcile.Core{newLabelCore("A", "a")} },
		FirstPass: func() func() {
			close(started)
			<-release
			return nil
		},
	})
	<-started
	select {
	case <-e.rt.Runner.Named():
		t.Fatal("Named closed before the first pass ran")
	default:
	}
	close(release)
	select {
	case <-e.rt.Runner.Named():
	case <-time.After(10 * time.Second):
		t.Fatal("Named not closed 10 s after the first pass started")
	}
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		if got := conditions(e.get(name)); got["A"] != fmt.Sprintf("v%d", i) {
			t.Errorf("%s when Named closed: conditions %v, want A=v%d", name, got, i)
		}
	}
}

// The runner holds each write it made only until the cache shows it: once
// it settles after a first pass over stored services, after Create and
// after a change, it holds none (meshnames_controllers_writes_unseen).
// Skipping the echoes of its own writes once left every one of them held,
// about 120 bytes a service for as long as the process ran.
func TestRunner_HoldsNoWriteOnceSeen(t *testing.T) {
	a := newLabelCore("A", "a")
	e := newEnv(t, reconciletest.Options{})
	const n = 40
	for i := range n {
		e.create(service(fmt.Sprintf("s%d", i), map[string]string{"a": fmt.Sprint(i)}))
	}
	e.rt = reconciletest.Start(t, e.st, reconciletest.Options{BatchSize: 16, Cores: func() []reconcile.Core { return []reconcile.Core{a} }})
	unseen := func(when string) {
		t.Helper()
		e.rt.Settle()
		if v := gauge(t, e.rt.Metrics, "meshnames_controllers_writes_unseen"); v != 0 {
			t.Errorf("%s: %v writes held after the runner settled, want 0", when, v)
		}
	}
	unseen("after the first pass")
	if got := conditions(e.get(fmt.Sprintf("s%d", n-1)))["A"]; got != fmt.Sprint(n-1) {
		t.Fatalf("the first pass did not decide s%d: condition %q", n-1, got)
	}

	var objs []*resource.Object
	for i := range n {
		objs = append(objs, service(fmt.Sprintf("new%d", i), map[string]string{"a": "x"}))
	}
	rs, ok, err := e.rt.Runner.Create(context.Background(), creations(objs...))
	if err != nil || !ok {
		t.Fatalf("Create: ok %v, err %v", ok, err)
	}
	e.rt.SettleAt(rs[len(rs)-1].Revision)
	unseen("after Create")

	e.setLabel("s0", "a", "changed")
	unseen("after a change")
}

// gauge reads the value of the gauge name from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// condCore is what the test cores below share: one condition of
// MeshServices, which Decide sets to what value returns, and the services
// marked dirty. Its methods hold mu; value is called with it held.
type condCore struct {
	reconcile.Base
	cond  string
	value func() string
	dirtyKeys
}

func (c *condCore) Name() string { return c.cond }

func (c *condCore) Dirty() []resource.Key { return c.take() }

func (c *condCore) Owns(k resource.Kind) store.StatusPatch { return ownsCondition(k, c.cond) }

func (c *condCore) Decide(_ *resource.Object, st resource.Status) []store.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.value(); v != "" {
		svc := st.(resource.ServiceStatusOf).Service()
		svc.Conditions = append(svc.Conditions, resource.Condition{Type: c.cond, Status: resource.ConditionTrue, Message: v})
	}
	return nil
}

func (c *condCore) Sum(d *reconcile.Digest, st resource.Status) {
	if s, ok := st.(resource.ServiceStatusOf); ok && s != nil {
		for _, cond := range s.Service().Conditions {
			if cond.Type == c.cond {
				d.String(cond.Message)
			}
		}
	}
}

// meshCore decides condition M of every service: the names of the Meshes
// it has observed besides default, so that a service's status depends on
// another resource (as a service's hostnames depend on the generators).
type meshCore struct {
	condCore
	meshes   map[string]bool
	services map[resource.Key]bool
}

func newMeshCore() *meshCore {
	c := &meshCore{}
	c.cond, c.value = "M", c.known
	return c
}

func (c *meshCore) Watches(k resource.Kind) bool {
	return k == resource.Mesh || k == resource.MeshService
}

func (c *meshCore) Start(context.Context, reconcile.Env) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.meshes, c.services, c.dirty = map[string]bool{}, map[resource.Key]bool{}, nil
	return nil
}

func (c *meshCore) Observe(k resource.Key, obj *resource.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case k.Kind == resource.Mesh && k.Name != "default":
		c.meshes[k.Name] = obj != nil
		for s := range c.services {
			c.dirty = append(c.dirty, s)
		}
	case k.Kind == resource.MeshService && obj == nil:
		delete(c.services, k)
	case k.Kind == resource.MeshService:
		c.services[k] = true
		c.dirty = append(c.dirty, k)
	}
}

func (c *meshCore) known() string {
	var names []string
	for m, ok := range c.meshes {
		if ok {
			names = append(names, m)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// A create whose After names a write the caller made just before (a
// zone storing a generator and then the services it names) is decided
// over that write, even though creates are taken before queued changes:
// the service is written once, with what the write decides.
func TestRunner_CreateDecidedAfterTheCallersWrite(t *testing.T) {
	c := newMeshCore()
	e := newEnv(t, reconciletest.Options{Cores: func() []reconcile.Core { return []reconcile.Core{c} }})
	e.rt.Settle()
	for i := range 20 {
		mesh := e.create(&resource.Object{Kind: resource.Mesh, Name: fmt.Sprintf("m%02d", i), Spec: &resource.MeshSpec{}})
		name := fmt.Sprintf("s%02d", i)
		cr := creations(service(name, nil))
		cr[0].After = mesh.Revision
		rs, ok, err := e.rt.Runner.Create(context.Background(), cr)
		if err != nil || !ok || rs[0].Err != nil {
			t.Fatalf("Create %s: ok %v, %v, %v", name, ok, err, rs)
		}
		e.rt.SettleAt(rs[0].Revision)
		o := e.get(name)
		if got := conditions(o)["M"]; !strings.HasSuffix(got, mesh.Name) || o.Version != 1 {
			t.Fatalf("%s created at version %d with M = %q; want version 1 with %s, the Mesh written just before", name, o.Version, got, mesh.Name)
		}
	}
}

// countCore decides condition N of every service: how many services it
// knows, so that a new service changes every other's status.
type countCore struct {
	condCore
	services map[resource.Key]bool
}

func newCountCore() *countCore {
	c := &countCore{}
	c.cond, c.value = "N", func() string { return fmt.Sprint(len(c.services)) }
	return c
}

func (c *countCore) Watches(k resource.Kind) bool { return k == resource.MeshService }

func (c *countCore) Start(context.Context, reconcile.Env) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.services, c.dirty = map[resource.Key]bool{}, nil
	return nil
}

func (c *countCore) Observe(k resource.Key, obj *resource.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if obj == nil {
		delete(c.services, k)
	} else {
		c.services[k] = true
	}
	for s := range c.services {
		c.dirty = append(c.dirty, s)
	}
}

// A create that changes the status of a resource an earlier create pass
// wrote, before the cache shows that resource (a MeshMultiZoneService
// and, just after, a service it selects), reaches it: the runner decides
// it again once the cache shows it, instead of skipping its change event
// as its own write's echo.
func TestRunner_CreateReachesWhatItJustCreated(t *testing.T) {
	e := newEnv(t, reconciletest.Options{Cores: func() []reconcile.Core { return []reconcile.Core{newCountCore()} }})
	e.rt.Settle()
	for i := range 10 {
		var last store.Result
		for j := range 2 {
			rs, ok, err := e.rt.Runner.Create(context.Background(), creations(service(fmt.Sprintf("s%d-%d", i, j), nil)))
			if err != nil || !ok || rs[0].Err != nil {
				t.Fatalf("Create: ok %v, %v, %v", ok, err, rs)
			}
			last = rs[0]
		}
		e.rt.SettleAt(last.Revision)
		e.rt.Settle()
		want := fmt.Sprint(2 * (i + 1))
		for j := range 2 {
			name := fmt.Sprintf("s%d-%d", i, j)
			if got := conditions(e.get(name))["N"]; got != want {
				t.Fatalf("%s: N = %q, want %s (every service it knows of)", name, got, want)
			}
		}
	}
}
