package reconcile_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/reconcile/reconciletest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// labelCore decides one condition of every MeshService: its type is the
// core's, its message the value of a label, so a test controls what is
// decided by writing labels.
type labelCore struct {
	reconcile.Base
	cond, label string

	dirtyKeys // its mu guards the fields below too
	values    map[resource.Key]string
	decided   int
	starts    int
	observed  map[resource.Key]int
}

func newLabelCore(cond, label string) *labelCore {
	return &labelCore{cond: cond, label: label}
}

func (c *labelCore) Name() string                 { return c.cond }
func (c *labelCore) Watches(k resource.Kind) bool { return k == resource.MeshService }

func (c *labelCore) Start(context.Context, reconcile.Env) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values, c.dirty, c.observed = map[resource.Key]string{}, nil, map[resource.Key]int{}
	c.starts++
	return nil
}

func (c *labelCore) Observe(k resource.Key, obj *resource.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed[k]++
	if obj == nil {
		delete(c.values, k)
		return
	}
	c.values[k] = obj.Labels[c.label]
	c.dirty = append(c.dirty, k)
}

func (c *labelCore) Dirty() []resource.Key { return c.take() }

func (c *labelCore) Owns(k resource.Kind) store.StatusPatch { return ownsCondition(k, c.cond) }

// dirtyKeys is the lock and the services marked dirty that the test
// cores share.
type dirtyKeys struct {
	mu    sync.Mutex
	dirty []resource.Key
}

// take returns the services marked dirty and forgets them.
func (d *dirtyKeys) take() []resource.Key {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.dirty
	d.dirty = nil
	return out
}

// ownsCondition is the Owns of a core that owns the condition cond of
// MeshServices.
func ownsCondition(k resource.Kind, cond string) store.StatusPatch {
	if k == resource.MeshService {
		return store.StatusPatch{Conditions: []string{cond}}
	}
	return store.StatusPatch{}
}

func (c *labelCore) Decide(obj *resource.Object, st resource.Status) []store.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decided++
	if v := c.values[obj.Key()]; v != "" {
		svc := st.(resource.ServiceStatusOf).Service()
		svc.Conditions = append(svc.Conditions, resource.Condition{Type: c.cond, Status: resource.ConditionTrue, Message: v})
	}
	return nil
}

func (c *labelCore) Sum(d *reconcile.Digest, st resource.Status) {
	s, ok := st.(resource.ServiceStatusOf)
	if !ok || s == nil {
		return
	}
	for _, cond := range s.Service().Conditions {
		if cond.Type == c.cond {
			d.String(cond.Message)
		}
	}
}

type env struct {
	t  *testing.T
	st store.Store
	rt *reconciletest.Env
}

func newEnv(t *testing.T, o reconciletest.Options) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st}
	e.create(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}})
	if o.Cores != nil {
		e.rt = reconciletest.Start(t, st, o)
	}
	return e
}

func (e *env) create(o *resource.Object) *resource.Object {
	e.t.Helper()
	got, err := store.Create(context.Background(), e.st, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func (e *env) get(name string) *resource.Object {
	e.t.Helper()
	o, err := e.st.Get(context.Background(), svcKey(name))
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

// setLabel updates label k of service name to v and waits for the
// runner to settle.
func (e *env) setLabel(name, k, v string) {
	e.t.Helper()
	cur := e.get(name)
	cur.Labels[k] = v
	if _, err := store.Update(context.Background(), e.st, cur); err != nil {
		e.t.Fatal(err)
	}
	e.rt.Settle()
}

func svcKey(name string) resource.Key {
	return resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name}
}

func service(name string, labels map[string]string) *resource.Object {
	return &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: name, Labels: labels, Spec: &resource.MeshServiceSpec{}}
}

func conditions(o *resource.Object) map[string]string {
	out := map[string]string{}
	if st, ok := o.Status.(resource.ServiceStatusOf); ok && st != nil {
		for _, c := range st.Service().Conditions {
			out[c.Type] = c.Message
		}
	}
	return out
}

// Two cores decide parts of one status: each service gets ONE status write
// carrying both parts, and a change that alters neither writes nothing.
func TestRunner_OneStatusWritePerService(t *testing.T) {
	a, b := newLabelCore("A", "a"), newLabelCore("B", "b")
	e := newEnv(t, reconciletest.Options{})
	for i := range 3 {
		e.create(service(fmt.Sprintf("s%d", i), map[string]string{"a": "x" + strconv.Itoa(i), "b": "y" + strconv.Itoa(i)}))
	}
	e.rt = reconciletest.Start(t, e.st, reconciletest.Options{Cores: func() []reconcile.Core { return []reconcile.Core{a, b} }})
	e.rt.Settle()
	for i := range 3 {
		o := e.get(fmt.Sprintf("s%d", i))
		want := map[string]string{"A": "x" + strconv.Itoa(i), "B": "y" + strconv.Itoa(i)}
		if got := conditions(o); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("s%d conditions = %v, want %v", i, got, want)
		}
		if o.Version != 2 {
			t.Errorf("s%d at version %d, want 2: created, then one status write", i, o.Version)
		}
	}

	// A label neither core reads: decided again, nothing written.
	e.setLabel("s0", "other", "1")
	if v := e.get("s0").Version; v != 4-1 {
		t.Errorf("s0 at version %d, want 3: the label update only", v)
	}

	// One core's input changes: one write, the other part kept.
	e.setLabel("s1", "b", "changed")
	o := e.get("s1")
	if got := conditions(o); got["A"] != "x1" || got["B"] != "changed" {
		t.Errorf("s1 conditions = %v", got)
	}
	if o.Version != 4 {
		t.Errorf("s1 at version %d, want 4: label update and one status write", o.Version)
	}
}

// The first pass writes in batches as they fill, the last one partial.
func TestRunner_WritesInBatches(t *testing.T) {
	e := newEnv(t, reconciletest.Options{})
	const n = 7
	for i := range n {
		e.create(service(fmt.Sprintf("s%d", i), map[string]string{"a": "v"}))
	}
	c := newLabelCore("A", "a")
	e.rt = reconciletest.Start(t, e.st, reconciletest.Options{BatchSize: 2, Cores: func() []reconcile.Core { return []reconcile.Core{c} }})
	e.rt.Settle()
	if got := e.rt.Applies.Load(); got != 4 {
		t.Errorf("%d batches, want 4 (2+2+2+1)", got)
	}
	for i := range n {
		if got := conditions(e.get(fmt.Sprintf("s%d", i)))["A"]; got != "v" {
			t.Errorf("s%d: condition %q", i, got)
		}
	}
}

// FirstPass brackets the first pass of a term: called as it starts, its
// done once the pass's writes are committed, and neither for the passes
// that follow.
func TestRunner_FirstPassBracketsTheFirstPassOnly(t *testing.T) {
	e := newEnv(t, reconciletest.Options{})
	const n = 5
	for i := range n {
		e.create(service(fmt.Sprintf("s%d", i), map[string]string{"a": "v"}))
	}
	var starts, dones atomic.Int32
	var writtenAtDone atomic.Int64
	c := newLabelCore("A", "a")
	e.rt = reconciletest.Start(t, e.st, reconciletest.Options{BatchSize: 2, Cores: func() []reconcile.Core { return []reconcile.Core{c} },
		FirstPass: func() func() {
			starts.Add(1)
			return func() {
				dones.Add(1)
				writtenAtDone.Store(e.rt.Applies.Load())
			}
		}})
	e.rt.Settle()
	if starts.Load() != 1 || dones.Load() != 1 {
		t.Fatalf("FirstPass called %d times, done %d, want 1 and 1", starts.Load(), dones.Load())
	}
	if got := writtenAtDone.Load(); got != 3 {
		t.Errorf("done called after %d batches, want all 3 of the first pass (2+2+1)", got)
	}
	e.setLabel("s0", "a", "w")
	if got := conditions(e.get("s0"))["A"]; got != "w" {
		t.Fatalf("s0 condition %q after the change, want w", got)
	}
	if starts.Load() != 1 || dones.Load() != 1 {
		t.Errorf("a later pass called FirstPass: %d starts, %d dones", starts.Load(), dones.Load())
	}
}

// A deposed leader stops at the first write the fence refuses instead of
// trying every remaining batch, and writes nothing.
func TestRunner_FencedPassStops(t *testing.T) {
	e := newEnv(t, reconciletest.Options{})
	rs, err := e.st.Apply(context.Background(), store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: "leader",
		Value: store.Fence{Lease: "leader", Holder: "b", Term: 2}.LeaseValue(), ExpiresAt: time.Now().Add(time.Hour)}})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	for i := range 7 {
		e.create(service(fmt.Sprintf("s%d", i), map[string]string{"a": "v"}))
	}
	c := newLabelCore("A", "a")
	rt := reconciletest.Start(t, e.st, reconciletest.Options{BatchSize: 2, Fence: &store.Fence{Lease: "leader", Holder: "a", Term: 1},
		Cores: func() []reconcile.Core { return []reconcile.Core{c} }})
	select {
	case <-rt.Stopped(): // Run returns by itself once fenced
	case <-time.After(10 * time.Second):
		t.Fatal("the fenced runner did not stop")
	}
	if n := rt.Fenced.Load(); n != 1 {
		t.Errorf("%d fenced batches, want 1", n)
	}
	for i := range 7 {
		if got := conditions(e.get(fmt.Sprintf("s%d", i))); len(got) != 0 {
			t.Errorf("s%d: a fenced runner wrote %v", i, got)
		}
	}
}

// A runner started on a store whose statuses are already right writes
// nothing; a restart rebuilds the cores from the store.
func TestRunner_RestartWritesNothingWhenSettled(t *testing.T) {
	c := newLabelCore("A", "a")
	e := newEnv(t, reconciletest.Options{Cores: func() []reconcile.Core { return []reconcile.Core{c} }})
	e.create(service("s", map[string]string{"a": "v"}))
	e.rt.Settle()
	before := e.get("s").Version
	e.rt.Restart()
	e.rt.Settle()
	if v := e.get("s").Version; v != before {
		t.Errorf("version %d -> %d after a restart with nothing to change", before, v)
	}
	c.mu.Lock()
	starts := c.starts
	c.mu.Unlock()
	if starts != 2 {
		t.Errorf("core started %d times, want 2", starts)
	}
}

// opsCore asks for one lease write per Ops call while it has some queued,
// and records the results handed back.
type opsCore struct {
	reconcile.Base
	mu      sync.Mutex
	queued  []string
	results map[string]error
	wake    time.Time
}

func (c *opsCore) Name() string                           { return "ops" }
func (c *opsCore) Watches(resource.Kind) bool             { return false }
func (c *opsCore) Observe(resource.Key, *resource.Object) {}
func (c *opsCore) Wake() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wake
}

func (c *opsCore) Ops(time.Time) []reconcile.Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []reconcile.Write
	for _, name := range c.queued {
		out = append(out, reconcile.Write{
			Op: store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: name, Value: []byte("x")}},
			Done: func(r store.Result) {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.results[name] = r.Err
			},
		})
	}
	c.queued = nil
	c.wake = time.Time{}
	return out
}

// Writes a core asks for outside statuses are written, their results are
// handed back, and a Wake brings the runner back without any change.
func TestRunner_OpsAndWake(t *testing.T) {
	c := &opsCore{queued: []string{"one"}, results: map[string]error{}}
	e := newEnv(t, reconciletest.Options{Cores: func() []reconcile.Core { return []reconcile.Core{c} }})
	e.rt.Settle()
	c.mu.Lock()
	c.queued = []string{"two"}
	c.wake = time.Now().Add(20 * time.Millisecond)
	c.mu.Unlock()
	e.rt.Runner.Kick() // re-arm the timer with the new Wake
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		_, one := c.results["one"]
		_, two := c.results["two"]
		c.mu.Unlock()
		if one && two {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("results %v, want one and two", c.results)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ls, err := e.st.Leases(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 {
		t.Errorf("leases %+v, want one and two", ls)
	}
}

func (c *labelCore) observations(k resource.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.observed[k]
}

// interleave commits, once, a write of its own in the same transaction
// as, and just before, the first status patch of key: a user's write
// landing between the runner's decision and its commit, which the cache
// then reports as one change with the patch.
type interleave struct {
	store.Store
	key    resource.Key
	done   bool
	before func() store.Op
}

func (s *interleave) Apply(ctx context.Context, ops ...store.Op) ([]store.Result, error) {
	for i, op := range ops {
		if s.done || op.Type != store.OpPatchStatus || op.Object.Key() != s.key {
			continue
		}
		s.done = true
		all := append(append(append([]store.Op{}, ops[:i]...), s.before()), ops[i:]...)
		for j := range all {
			for d := range all[j].DependsOn {
				if all[j].DependsOn[d] >= i {
					all[j].DependsOn[d]++
				}
			}
		}
		rs, err := s.Store.Apply(ctx, all...)
		if err != nil {
			return nil, err
		}
		return append(rs[:i], rs[i+1:]...), nil
	}
	return s.Store.Apply(ctx, ops...)
}

// The cache's report of the runner's own status write is not observed
// again by the cores (they decided it), but a write that landed between
// their decision and its commit is, even when the cache reports both as
// one change.
func TestRunner_SkipsOnlyItsOwnEchoes(t *testing.T) {
	e := newEnv(t, reconciletest.Options{})
	c := newLabelCore("A", "a")
	late := &interleave{Store: e.st, key: svcKey("s1")}
	late.before = func() store.Op {
		cur := e.get("s1")
		cur.Labels["a"] = "late"
		return store.Op{Type: store.OpUpdate, Object: cur}
	}
	e.rt = reconciletest.Start(t, late, reconciletest.Options{Cores: func() []reconcile.Core { return []reconcile.Core{c} }})
	e.rt.Settle()
	// Created while the runner runs: each create is reported once (a
	// service present at the start may be reported again by the cache's
	// first list, racing the runner's first view).
	e.create(service("s0", map[string]string{"a": "v"}))
	e.create(service("s1", map[string]string{"a": "v"}))
	e.rt.Settle()
	if got := conditions(e.get("s0"))["A"]; got != "v" {
		t.Errorf("s0: condition %q, want v", got)
	}
	if n := c.observations(svcKey("s0")); n != 1 {
		t.Errorf("s0 observed %d times, want 1: its creation, not the echo of its status write", n)
	}
	if got := conditions(e.get("s1"))["A"]; got != "late" {
		t.Errorf("s1: condition %q, want late: the label written before the status patch committed was missed", got)
	}

	// A change is observed once, and its status write's echo not at all.
	e.setLabel("s0", "a", "w")
	if got := conditions(e.get("s0"))["A"]; got != "w" {
		t.Errorf("s0: condition %q, want w", got)
	}
	if n := c.observations(svcKey("s0")); n != 2 {
		t.Errorf("s0 observed %d times, want 2: its creation and the label update", n)
	}
}

// handoverCore decides condition P of the services it was handed a value
// for, whether or not they exist yet, as the VIP core does with the
// addresses the Kubernetes controller hands over before it creates a
// MeshService. Its Ops can hold the runner at the start of a pass.
type handoverCore struct {
	reconcile.Base
	dirtyKeys // its mu guards the fields below too
	values    map[resource.Key]string
	hold      chan struct{} // when set, the next Ops closes holding and waits for it to close
	holding   chan struct{}
}

func (c *handoverCore) Name() string                           { return "handover" }
func (c *handoverCore) Watches(resource.Kind) bool             { return false }
func (c *handoverCore) Observe(resource.Key, *resource.Object) {}
func (c *handoverCore) Dirty() []resource.Key                  { return c.take() }
func (c *handoverCore) Owns(k resource.Kind) store.StatusPatch { return ownsCondition(k, "P") }

func (c *handoverCore) hand(k resource.Key, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values[k] = v
	c.dirty = append(c.dirty, k)
	c.hold, c.holding = make(chan struct{}), make(chan struct{})
}

func (c *handoverCore) Ops(time.Time) []reconcile.Write {
	c.mu.Lock()
	hold, holding := c.hold, c.holding
	c.hold, c.holding = nil, nil
	c.mu.Unlock()
	if hold != nil {
		close(holding)
		<-hold
	}
	return nil
}

func (c *handoverCore) Decide(obj *resource.Object, st resource.Status) []store.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.values[obj.Key()]; v != "" {
		svc := st.(resource.ServiceStatusOf).Service()
		svc.Conditions = append(svc.Conditions, resource.Condition{Type: "P", Status: resource.ConditionTrue, Message: v})
	}
	return nil
}

func (c *handoverCore) Sum(d *reconcile.Digest, st resource.Status) {
	for _, cond := range st.(resource.ServiceStatusOf).Service().Conditions {
		if cond.Type == "P" {
			d.String(cond.Message)
		}
	}
}

// A service one core marked dirty before it existed, decided by a pass
// that finds it in the cache before the other cores observed its creation,
// gets one status write with every core's part, not one with the first
// core's part and a second with the rest.
func TestRunner_DecidesAChangeOnceTheCoresObservedIt(t *testing.T) {
	h := &handoverCore{values: map[resource.Key]string{}}
	a := newLabelCore("A", "a")
	e := newEnv(t, reconciletest.Options{Cores: func() []reconcile.Core { return []reconcile.Core{h, a} }})
	e.rt.Settle()

	k := svcKey("s0")
	h.hand(k, "vip")
	h.mu.Lock()
	release, holding := h.hold, h.holding
	h.mu.Unlock()
	e.rt.Runner.Kick()
	<-holding // the kicked pass starts; k is dirty and not stored yet
	e.create(service("s0", map[string]string{"a": "x"}))
	deadline := time.Now().Add(5 * time.Second)
	for _, ok := e.rt.Cache.Peek(k); !ok; _, ok = e.rt.Cache.Peek(k) {
		if time.Now().After(deadline) {
			t.Fatal("the cache never showed s0")
		}
		time.Sleep(time.Millisecond)
	}
	close(release) // the pass decides k with s0 in the cache
	e.rt.Settle()

	o := e.get("s0")
	if got, want := conditions(o), map[string]string{"A": "x", "P": "vip"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("conditions = %v, want %v", got, want)
	}
	if o.Version != 2 {
		t.Errorf("s0 at version %d, want 2: created, then one status write with both parts", o.Version)
	}
}
