package vips

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/reconcile/reconciletest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// clock is a fake clock.
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

const quarantine = time.Minute

type env struct {
	t     *testing.T
	dir   string
	st    store.Store
	clock *clock
	pools map[resource.Kind]Prefixes
	rt    *reconciletest.Env
	// core is the runner's core of the current term.
	core *Core
	// fence, when set, fences the runner's writes, as a leader's are.
	fence *store.Fence
	// batch is the runner's BatchSize; 0 for the default.
	batch int
	// usage, when set, receives the figures of the cores of new terms.
	usage *Usage
}

func defaultPools() map[resource.Kind]Prefixes {
	return map[resource.Kind]Prefixes{
		resource.MeshService:          {V4: netip.MustParsePrefix("241.0.0.0/8")},
		resource.MeshExternalService:  {V4: netip.MustParsePrefix("242.0.0.0/8")},
		resource.MeshMultiZoneService: {V4: netip.MustParsePrefix("243.0.0.0/8")},
	}
}

func newEnv(t *testing.T, pools map[resource.Kind]Prefixes) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), clock: &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, pools: pools}
	e.open()
	e.create(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}})
	e.start()
	t.Cleanup(func() { e.halt(); e.st.Close() })
	return e
}

func (e *env) open() {
	st, err := sqlite.Open(e.dir, sqlite.WithClock(e.clock.Now))
	if err != nil {
		e.t.Fatal(err)
	}
	e.st = st
}

// start runs a cache and a runner of a new core, as a new leader would.
func (e *env) start() {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.rt = reconciletest.Start(e.t, e.st, reconciletest.Options{
		Cores: func() []reconcile.Core {
			e.core = New(Options{Pools: e.pools, Quarantine: quarantine, Log: log, Registerer: prometheus.NewRegistry(), Usage: e.usage})
			return []reconcile.Core{e.core}
		},
		Fence: e.fence, BatchSize: e.batch, Now: e.clock.Now, Log: log,
	})
}

func (e *env) halt() {
	if e.rt != nil {
		e.rt.Stop()
	}
}

// restart stops the runner and starts a new one on the same store.
func (e *env) restart() {
	e.halt()
	e.start()
}

// crash stops the runner and reopens the store, as after kill -9.
func (e *env) crash() {
	e.halt()
	e.st.Close()
	e.open()
	e.start()
}

// advance moves the clock and has the runner look at it.
func (e *env) advance(d time.Duration) {
	e.clock.Advance(d)
	e.rt.Runner.Kick()
}

func (e *env) create(o *resource.Object) {
	e.t.Helper()
	if o.Spec != nil {
		o.Spec.Default()
	}
	if _, err := store.Create(context.Background(), e.st, o); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) delete(k resource.Key) {
	e.t.Helper()
	if _, err := store.Delete(context.Background(), e.st, k, 0); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) vips(k resource.Key) []resource.VIP {
	o, err := e.st.Get(context.Background(), k)
	if err != nil {
		return nil
	}
	return statusVIPs(o)
}

// waitVIPs waits until k's VIPs, as "ip hostname", equal want.
func (e *env) waitVIPs(k resource.Key, want ...string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		got = got[:0]
		for _, v := range e.vips(k) {
			got = append(got, v.IP+" "+v.Hostname)
		}
		if cmp.Equal(want, got, cmpEmpty) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("VIPs of %s = %v, want %v", k, got, want)
}

var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func (e *env) condition(k resource.Key) string {
	o, err := e.st.Get(context.Background(), k)
	if err != nil {
		return ""
	}
	st, ok := o.Status.(resource.ServiceStatusOf)
	if !ok || st == nil {
		return ""
	}
	for _, c := range st.Service().Conditions {
		if c.Type == resource.ConditionVIPsAllocated {
			return c.Reason
		}
	}
	return ""
}

func (e *env) waitCondition(k resource.Key, want string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.condition(k) != want {
		if time.Now().After(deadline) {
			e.t.Fatalf("condition of %s = %q, want %q", k, e.condition(k), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) lease(ip string) (store.Lease, bool) {
	ls, err := e.st.Leases(context.Background(), LeasePrefix+ip)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, l := range ls {
		if l.Name == LeasePrefix+ip {
			return l, true
		}
	}
	return store.Lease{}, false
}

func ms(name string) *resource.Object {
	return &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: name, Spec: &resource.MeshServiceSpec{}}
}

func key(kind resource.Kind, name string) resource.Key {
	return resource.Key{Kind: kind, Mesh: "default", Name: name}
}

// The first pass writes in batches as they fill, the last one partial,
// each with the pool's cursor as it stands after the batch.
func TestController_WritesInBatches(t *testing.T) {
	e := newEnv(t, defaultPools())
	e.halt()
	const n = 7
	for i := range n {
		e.create(ms(fmt.Sprintf("s%d", i)))
	}
	e.batch = 2
	e.start()
	for i := range n {
		e.waitVIPs(key(resource.MeshService, fmt.Sprintf("s%d", i)), fmt.Sprintf("241.0.0.%d ", i+1))
	}
	ls, err := e.st.Leases(context.Background(), CursorLeasePrefix)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ls, func(l store.Lease) bool { return l.Name == CursorLeasePrefix+"241.0.0.0/8" })
	if i < 0 || string(ls[i].Value) != "241.0.0.8" {
		t.Errorf("cursor leases %+v, want 241.0.0.0/8 at 241.0.0.8", ls)
	}
}

func TestController_AllocatesPerKind(t *testing.T) {
	e := newEnv(t, defaultPools())
	e.create(ms("a"))
	e.create(ms("b"))
	e.create(&resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: "db", Spec: &resource.MeshExternalServiceSpec{
		Match: []resource.ExternalMatch{
			{Type: resource.MatchInternalVIP, Value: "db.ext.local", Port: 5432, Protocol: "tcp"},
			{Type: resource.MatchDomain, Value: "db.example.com", Port: 443, Protocol: "tls"},
			{Type: resource.MatchInternalVIP, Value: "db-ro.ext.local", Port: 5432, Protocol: "tcp"},
		}}})
	e.create(&resource.Object{Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "m", Spec: &resource.MeshMultiZoneServiceSpec{
		Selector: resource.MultiZoneSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}})

	// Network addresses are never handed out; each kind has its pool; one
	// VIP per InternalVIP match, carrying its hostname (seed 003).
	e.waitVIPs(key(resource.MeshService, "a"), "241.0.0.1 ")
	e.waitVIPs(key(resource.MeshService, "b"), "241.0.0.2 ")
	// An external service has one more for its generated hostnames.
	e.waitVIPs(key(resource.MeshExternalService, "db"), "242.0.0.1 ", "242.0.0.2 db.ext.local", "242.0.0.3 db-ro.ext.local")
	e.waitVIPs(key(resource.MeshMultiZoneService, "m"), "243.0.0.1 ")
	if l, ok := e.lease("241.0.0.1"); !ok || !l.ExpiresAt.IsZero() {
		t.Errorf("allocation lease of 241.0.0.1 = %+v, %v; want one without expiry", l, ok)
	}
}

// TestController_FencedWritesAreDropped runs the controller as the leader
// of term 1; when another instance takes the lease (term 2), its writes
// are rejected and nothing of them lands. The next leader's controller
// rebuilds from the store and allocates.
func TestController_FencedWritesAreDropped(t *testing.T) {
	e := newEnv(t, defaultPools())
	putLeader := func(f store.Fence) {
		t.Helper()
		rs, err := e.st.Apply(context.Background(), store.Op{Type: store.OpPutLease,
			Lease: &store.Lease{Name: f.Lease, Value: f.LeaseValue(), ExpiresAt: time.Now().Add(time.Hour)}})
		if err != nil || rs[0].Err != nil {
			t.Fatal(err, rs)
		}
	}
	first := store.Fence{Lease: "leader", Holder: "a", Term: 1}
	putLeader(first)
	e.fence = &first
	e.restart()
	e.create(ms("a"))
	e.waitVIPs(key(resource.MeshService, "a"), "241.0.0.1 ")

	second := store.Fence{Lease: "leader", Holder: "b", Term: 2}
	putLeader(second)
	e.create(ms("b"))
	time.Sleep(300 * time.Millisecond) // the deposed controller sees b and tries
	if got := e.vips(key(resource.MeshService, "b")); len(got) != 0 {
		t.Fatalf("the deposed controller gave b %v", got)
	}
	if l, ok := e.lease("241.0.0.2"); ok {
		t.Fatalf("the deposed controller left the lease %+v", l)
	}

	e.fence = &second
	e.restart()
	e.waitVIPs(key(resource.MeshService, "b"), "241.0.0.2 ")
}

func TestController_QuarantineSurvivesRestartAndCrash(t *testing.T) {
	pools := defaultPools()
	pools[resource.MeshService] = Prefixes{V4: netip.MustParsePrefix("10.0.0.0/29")} // 6 usable
	e := newEnv(t, pools)
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		e.create(ms(n))
	}
	e.waitVIPs(key(resource.MeshService, "f"), "10.0.0.6 ")
	e.delete(key(resource.MeshService, "c")) // frees 10.0.0.3 into quarantine
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l, ok := e.lease("10.0.0.3"); ok && l.ExpiresAt.Equal(e.clock.Now().Add(quarantine)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no quarantine lease for 10.0.0.3")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The pool is full but for the quarantined address: a new service
	// waits, across a restart and a crash.
	e.create(ms("g"))
	e.waitCondition(key(resource.MeshService, "g"), resource.ReasonPoolExhausted)
	e.restart()
	e.create(ms("h"))
	e.waitCondition(key(resource.MeshService, "h"), resource.ReasonPoolExhausted)
	e.crash()
	e.advance(quarantine - time.Second)
	time.Sleep(300 * time.Millisecond) // several expiry ticks, still inside the quarantine
	if v := e.vips(key(resource.MeshService, "g")); len(v) != 0 {
		t.Fatalf("g got %v inside the quarantine", v)
	}
	// After the quarantine one of the waiting services gets the address.
	e.advance(2 * time.Second)
	deadline = time.Now().Add(10 * time.Second)
	for len(e.vips(key(resource.MeshService, "g")))+len(e.vips(key(resource.MeshService, "h"))) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no waiting service got the address after its quarantine")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestController_ReleaseWhileNoControllerRuns(t *testing.T) {
	pools := defaultPools()
	pools[resource.MeshService] = Prefixes{V4: netip.MustParsePrefix("10.0.0.0/30")} // 2 usable
	e := newEnv(t, pools)
	e.create(ms("a"))
	e.create(ms("b"))
	e.waitVIPs(key(resource.MeshService, "b"), "10.0.0.2 ")
	e.halt()
	e.delete(key(resource.MeshService, "a")) // nobody sees this happen
	e.advance(10 * time.Minute)
	e.start()
	e.create(ms("c"))
	// The allocation lease of the deleted service is quarantined from the
	// moment the new controller found it, not from an unknown past.
	e.waitCondition(key(resource.MeshService, "c"), resource.ReasonPoolExhausted)
	l, ok := e.lease("10.0.0.1")
	if !ok || !l.ExpiresAt.Equal(e.clock.Now().Add(quarantine)) {
		t.Fatalf("lease of 10.0.0.1 = %+v, %v; want quarantine until now+%s", l, ok, quarantine)
	}
	e.advance(quarantine + time.Second)
	e.waitVIPs(key(resource.MeshService, "c"), "10.0.0.1 ")
	e.waitCondition(key(resource.MeshService, "c"), "")
}

func TestController_KeepsForeignAndOutOfPoolAddresses(t *testing.T) {
	e := newEnv(t, defaultPools())
	// A service that already has an address (a Kubernetes ClusterIP) keeps
	// it and gets no Kuma VIP.
	o := ms("kube")
	o.Status = &resource.ServiceStatus{VIPs: []resource.VIP{{IP: "10.96.0.10", Type: resource.VIPKubernetes}}}
	e.create(o)
	cur, _ := e.st.Get(context.Background(), o.Key())
	cur.Status = &resource.ServiceStatus{VIPs: []resource.VIP{{IP: "10.96.0.10", Type: resource.VIPKubernetes}}}
	if _, err := store.UpdateStatus(context.Background(), e.st, cur); err != nil {
		t.Fatal(err)
	}
	e.create(ms("a"))
	e.waitVIPs(key(resource.MeshService, "a"), "241.0.0.1 ")
	e.waitVIPs(key(resource.MeshService, "kube"), "10.96.0.10 ")

	// The pool changes: a's VIP is now outside it, and a keeps it.
	e.halt()
	e.pools[resource.MeshService] = Prefixes{V4: netip.MustParsePrefix("250.0.0.0/8")}
	e.start()
	e.create(ms("b"))
	e.waitVIPs(key(resource.MeshService, "b"), "250.0.0.1 ")
	e.waitVIPs(key(resource.MeshService, "a"), "241.0.0.1 ")
}

func TestController_RemovedInternalVIPIsQuarantined(t *testing.T) {
	e := newEnv(t, defaultPools())
	spec := &resource.MeshExternalServiceSpec{Match: []resource.ExternalMatch{
		{Type: resource.MatchInternalVIP, Value: "one.ext.local", Port: 80, Protocol: "http"},
		{Type: resource.MatchInternalVIP, Value: "two.ext.local", Port: 80, Protocol: "http"},
	}}
	e.create(&resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: "x", Spec: spec})
	k := key(resource.MeshExternalService, "x")
	e.waitVIPs(k, "242.0.0.1 ", "242.0.0.2 one.ext.local", "242.0.0.3 two.ext.local")
	// The controller may still be writing the status (each write bumps
	// the version), so retry a conflict as any client would.
	for {
		cur, _ := e.st.Get(context.Background(), k)
		cur.Spec.(*resource.MeshExternalServiceSpec).Match = cur.Spec.(*resource.MeshExternalServiceSpec).Match[1:]
		_, err := store.Update(context.Background(), e.st, cur)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	e.waitVIPs(k, "242.0.0.1 ", "242.0.0.3 two.ext.local")
	if l, ok := e.lease("242.0.0.2"); !ok || l.ExpiresAt.IsZero() {
		t.Errorf("the removed match's VIP is not quarantined: %+v, %v", l, ok)
	}
}

// TestController_Random applies random sequences of creations, deletions,
// clock moves, restarts and crashes (a leader change looks the same to the
// controller) to a small pool, and checks after each settled step that no
// two live services share a VIP, that no VIP was handed out inside its
// quarantine, and that every service has a VIP while the pool has room.
func TestController_Random(t *testing.T) {
	for seed := range 3 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			pools := defaultPools()
			pools[resource.MeshService] = Prefixes{V4: netip.MustParsePrefix("10.0.0.0/29")} // 6 usable
			e := newEnv(t, pools)
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			live := map[string]bool{}
			released := map[string]string{} // ip -> end of its quarantine (RFC 3339)
			holder := map[string]string{}   // service -> ip it was seen with
			next := 0
			for step := range 40 {
				switch op := rng.IntN(10); {
				case op < 5:
					name := fmt.Sprintf("s%d", next)
					next++
					e.create(ms(name))
					live[name] = true
				case op < 7 && len(live) > 0:
					names := slices.Sorted(mapsKeys(live))
					name := names[rng.IntN(len(names))]
					e.delete(key(resource.MeshService, name))
					delete(live, name)
					if ip, ok := holder[name]; ok {
						released[ip] = e.clock.Now().Add(quarantine).Format(time.RFC3339Nano)
						delete(holder, name)
					}
				case op < 8:
					e.advance(time.Duration(rng.IntN(90)) * time.Second)
				case op < 9:
					e.restart()
				default:
					e.crash()
				}
				// Safety (no shared VIP, no reuse inside a quarantine, no VIP
				// change) must hold on every look; liveness (a VIP for every
				// service while the pool has room) eventually.
				deadline := time.Now().Add(10 * time.Second)
				for {
					lacking, free := e.check(t, step, live, holder, released)
					if lacking == 0 || free <= 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("step %d: %d of %d services lack a VIP while %d addresses are free", step, lacking, len(live), free)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
}

// check verifies the safety properties and returns how many live services
// lack a VIP and how many addresses of the 6 are free (not used, not in
// quarantine).
func (e *env) check(t *testing.T, step int, live map[string]bool, holder, released map[string]string) (lacking, free int) {
	t.Helper()
	now := e.clock.Now()
	seen := map[string]string{}
	for name := range live {
		vs := e.vips(key(resource.MeshService, name))
		if len(vs) == 0 {
			lacking++
			continue
		}
		ip := vs[0].IP
		if other, dup := seen[ip]; dup {
			t.Fatalf("step %d: %s and %s share %s", step, other, name, ip)
		}
		seen[ip] = name
		if prev, ok := holder[name]; ok && prev != ip {
			t.Fatalf("step %d: %s changed VIP from %s to %s", step, name, prev, ip)
		}
		if _, ok := holder[name]; !ok {
			if until, q := released[ip]; q && now.Before(parseTime(until)) {
				t.Fatalf("step %d: %s got %s inside its quarantine (until %s, now %s)", step, name, ip, until, now)
			}
			holder[name] = ip
		}
	}
	// Free by the controller's own record: a deletion it only learns of
	// after a crash is quarantined from then, later than the test's
	// release time (on purpose: never shorter). The test's release times
	// above are the minimum the quarantine must last.
	leases, err := e.st.Leases(context.Background(), LeasePrefix)
	if err != nil {
		t.Fatal(err)
	}
	free = 6 - len(seen)
	for _, l := range leases {
		ip := l.Name[len(LeasePrefix):]
		if _, used := seen[ip]; !used && l.ExpiresAt.After(now) {
			free--
		}
	}
	return lacking, free
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
