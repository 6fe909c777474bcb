package vips

// Tests of the VIP planner alone: a Core driven as reconcile's runner drives
// it (Start, Observe, Dirty, Decide into fresh statuses, Ops, Wake,
// BeforeFlush), with a fake clock and no store but a lease table. The
// controller tests (controller_test.go) run the same core over a real store
// and runner.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// leaseStore is a store.Store holding only leases: a core reads leases at
// Start and nothing else, so every other call fails the test.
type leaseStore struct {
	t      *testing.T
	leases map[string]store.Lease
}

func (s *leaseStore) Leases(_ context.Context, prefix string) ([]store.Lease, error) {
	var out []store.Lease
	for name, l := range s.leases {
		if strings.HasPrefix(name, prefix) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b store.Lease) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *leaseStore) fail(method string) error {
	s.t.Errorf("the core called Store.%s; it may only read leases", method)
	return errors.New("leaseStore: only Leases")
}

func (s *leaseStore) Get(context.Context, resource.Key) (*resource.Object, error) {
	return nil, s.fail("Get")
}

func (s *leaseStore) List(context.Context, resource.Kind) ([]*resource.Object, int64, error) {
	return nil, 0, s.fail("List")
}

func (s *leaseStore) Apply(context.Context, ...store.Op) ([]store.Result, error) {
	return nil, s.fail("Apply")
}

func (s *leaseStore) Changes(context.Context, int64, int) ([]store.Event, error) {
	return nil, s.fail("Changes")
}

func (s *leaseStore) Changed() <-chan struct{} { _ = s.fail("Changed"); return nil }
func (s *leaseStore) Close() error             { return s.fail("Close") }

// planner runs one Core as the runner does. The runner's store is played
// by the objects (each carrying the last status decided for it, as if its
// write had landed) and the lease table (every op the core returned,
// applied in order).
type planner struct {
	t      *testing.T
	clock  *clock
	pools  map[resource.Kind]Prefixes
	core   *Core
	objs   map[resource.Key]*resource.Object
	leases map[string]store.Lease
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newPlanner starts a core on the given leases and observes objs as the
// first view of a term; call pass for its first pass.
func newPlanner(t *testing.T, pools map[resource.Kind]Prefixes, leases []store.Lease, objs ...*resource.Object) *planner {
	t.Helper()
	p := &planner{t: t, clock: &clock{t: t0}, pools: pools, objs: map[resource.Key]*resource.Object{}, leases: map[string]store.Lease{}}
	for _, l := range leases {
		p.leases[l.Name] = l
	}
	for _, o := range objs {
		p.objs[o.Key()] = o
	}
	p.start()
	return p
}

// start starts a new core on the lease table and observes every object.
func (p *planner) start() {
	p.t.Helper()
	p.core = New(Options{Pools: p.pools, Quarantine: quarantine, Log: discard()})
	env := reconcile.Env{Store: &leaseStore{t: p.t, leases: p.leases}, Now: p.clock.Now, Log: discard()}
	if err := p.core.Start(context.Background(), env); err != nil {
		p.t.Fatal(err)
	}
	keys := make([]resource.Key, 0, len(p.objs))
	for k := range p.objs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareTestKeys)
	for _, k := range keys {
		p.core.Observe(k, p.objs[k])
	}
}

func compareTestKeys(a, b resource.Key) int {
	return strings.Compare(ownerString(a), ownerString(b))
}

// put observes a new or changed object; a changed object without a status
// keeps the one decided last, as the cache's copy does.
func (p *planner) put(objs ...*resource.Object) {
	for _, o := range objs {
		if old, ok := p.objs[o.Key()]; ok && o.Status == nil {
			o.Status = old.Status
		}
		p.objs[o.Key()] = o
		p.core.Observe(o.Key(), o)
	}
}

func (p *planner) del(k resource.Key) {
	delete(p.objs, k)
	p.core.Observe(k, nil)
}

// pass does what one pass of the runner does: the core's Ops, then a
// status for every dirty service in key order (Decide into a fresh
// status), then BeforeFlush. It returns the keys decided and every op, in
// order, and applies the ops to the lease table and the statuses to the
// objects.
func (p *planner) pass() (decided []resource.Key, ops []store.Op) {
	p.t.Helper()
	for _, w := range p.core.Ops(p.clock.Now()) {
		ops = append(ops, w.Op)
	}
	keys := p.core.Dirty()
	slices.SortFunc(keys, compareTestKeys)
	for _, k := range slices.Compact(keys) {
		obj, ok := p.objs[k]
		if !ok {
			continue
		}
		st := resource.MustLookup(k.Kind).NewStatus()
		ops = append(ops, p.core.Decide(obj, st)...)
		next := *obj
		next.Status = st
		p.objs[k] = &next
		decided = append(decided, k)
	}
	ops = append(ops, p.core.BeforeFlush()...)
	for _, op := range ops {
		switch op.Type {
		case store.OpPutLease:
			p.leases[op.Lease.Name] = *op.Lease
		case store.OpDeleteLease:
			delete(p.leases, op.Lease.Name)
		case store.OpAppendRecord:
			// The history of addresses (internal/history) is not what
			// these tests are about.
		default:
			p.t.Fatalf("the core asked for a %v op; it writes only leases and records", op.Type)
		}
	}
	return decided, ops
}

// advance moves the clock.
func (p *planner) advance(d time.Duration) { p.clock.Advance(d) }

// vips returns the VIPs of k as "ip" or "ip hostname".
func (p *planner) vips(k resource.Key) []string {
	var out []string
	for _, v := range statusVIPs(p.objs[k]) {
		out = append(out, strings.TrimSpace(v.IP+" "+v.Hostname))
	}
	return out
}

// condition returns k's VIPsAllocated condition, if any.
func (p *planner) condition(k resource.Key) (resource.Condition, bool) {
	st, ok := p.objs[k].Status.(resource.ServiceStatusOf)
	if !ok || st == nil {
		return resource.Condition{}, false
	}
	for _, c := range st.Service().Conditions {
		if c.Type == resource.ConditionVIPsAllocated {
			return c, true
		}
	}
	return resource.Condition{}, false
}

// lease is a lease of the table as the tests compare it.
type lease struct {
	Owner    string
	Hostname string
	Released bool
	Until    time.Time
}

// leaseTable returns the VIP leases (vip/...) by address.
func (p *planner) leaseTable() map[string]lease {
	out := map[string]lease{}
	for name, l := range p.leases {
		ip, ok := strings.CutPrefix(name, LeasePrefix)
		if !ok {
			continue
		}
		var v leaseValue
		if err := json.Unmarshal(l.Value, &v); err != nil {
			p.t.Fatalf("lease %s holds %q: %v", name, l.Value, err)
		}
		out[ip] = lease{Owner: v.Owner, Hostname: v.Hostname, Released: v.Released, Until: l.ExpiresAt}
	}
	return out
}

func pool4(prefix string) map[resource.Kind]Prefixes {
	pools := defaultPools()
	pools[resource.MeshService] = Prefixes{V4: netip.MustParsePrefix(prefix)}
	return pools
}

// withVIPs returns o with a status showing ips (Kuma VIPs, or of the type
// given as "ip/Type").
func withVIPs(o *resource.Object, ips ...string) *resource.Object {
	st := resource.MustLookup(o.Kind).NewStatus()
	svc := st.(resource.ServiceStatusOf).Service()
	for _, ip := range ips {
		typ := resource.VIPKuma
		if a, b, ok := strings.Cut(ip, "/"); ok {
			ip, typ = a, b
		}
		svc.VIPs = append(svc.VIPs, resource.VIP{IP: ip, Type: typ})
	}
	o.Status = st
	return o
}

func allocLease(ip, owner string) store.Lease {
	b, _ := json.Marshal(leaseValue{Owner: owner})
	return store.Lease{Name: LeasePrefix + ip, Value: b}
}

func quarantineLease(ip, owner string, until time.Time) store.Lease {
	b, _ := json.Marshal(leaseValue{Owner: owner, Released: true})
	return store.Lease{Name: LeasePrefix + ip, Value: b, ExpiresAt: until}
}

func cursorLease(pool, ip string) store.Lease {
	return store.Lease{Name: CursorLeasePrefix + pool, Value: []byte(ip)}
}

func msKey(name string) resource.Key { return key(resource.MeshService, name) }

// Allocation is next-fit: from the cursor (restored from its lease),
// skipping what statuses show, wrapping around at the end of the pool.
func TestCore_AllocationOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pool     string
		cursor   string            // value of the pool's cursor lease at Start
		existing map[string]string // services whose status shows a VIP
		create   []string          // created after the first pass, in one pass
		want     map[string]string
	}{{
		name:   "from the first address, in key order",
		pool:   "10.0.0.0/24",
		create: []string{"c", "a", "b"},
		want:   map[string]string{"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"},
	}, {
		name:   "from the cursor its lease holds",
		pool:   "10.0.0.0/24",
		cursor: "10.0.0.7",
		create: []string{"a", "b"},
		want:   map[string]string{"a": "10.0.0.7", "b": "10.0.0.8"},
	}, {
		name:   "a cursor outside the pool is ignored",
		pool:   "10.0.0.0/24",
		cursor: "10.1.0.7",
		create: []string{"a"},
		want:   map[string]string{"a": "10.0.0.1"},
	}, {
		name:     "skipping addresses statuses show",
		pool:     "10.0.0.0/24",
		existing: map[string]string{"x": "10.0.0.1", "y": "10.0.0.3"},
		create:   []string{"a", "b"},
		want:     map[string]string{"a": "10.0.0.2", "b": "10.0.0.4", "x": "10.0.0.1", "y": "10.0.0.3"},
	}, {
		name:     "wrapping around at the end of the pool",
		pool:     "10.0.0.0/29", // 10.0.0.1-6
		cursor:   "10.0.0.6",
		existing: map[string]string{"x": "10.0.0.1"},
		create:   []string{"a", "b"},
		want:     map[string]string{"a": "10.0.0.6", "b": "10.0.0.2", "x": "10.0.0.1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var leases []store.Lease
			if tc.cursor != "" {
				leases = append(leases, cursorLease(tc.pool, tc.cursor))
			}
			var objs []*resource.Object
			for name, ip := range tc.existing {
				objs = append(objs, withVIPs(ms(name), ip))
				leases = append(leases, allocLease(ip, ownerString(msKey(name))))
			}
			p := newPlanner(t, pool4(tc.pool), leases, objs...)
			p.pass()
			for _, name := range tc.create {
				p.put(ms(name))
			}
			p.pass()
			got := map[string]string{}
			for k := range p.objs {
				got[k.Name] = strings.Join(p.vips(k), ",")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("VIPs (-want +got):\n%s", diff)
			}
		})
	}
}

// An address released into quarantine is handed out again only after the
// quarantine, and then only when next-fit comes round to it; the cursor
// survives a restart through its lease.
func TestCore_ReleasedAddressIsReusedLast(t *testing.T) {
	p := newPlanner(t, pool4("10.0.0.0/29"), nil) // 10.0.0.1-6
	p.pass()
	p.put(ms("a"), ms("b"), ms("c"))
	p.pass()
	p.del(msKey("b"))
	_, ops := p.pass()
	want := lease{Owner: "MeshService/default/b", Released: true, Until: t0.Add(quarantine)}
	if got := p.leaseTable()["10.0.0.2"]; got != want {
		t.Fatalf("lease of b's 10.0.0.2 after its deletion = %+v, want %+v (ops %v)", got, want, ops)
	}
	if got := p.core.Wake(); !got.Equal(t0.Add(quarantine)) {
		t.Fatalf("Wake = %s, want the end of the quarantine %s", got, t0.Add(quarantine))
	}
	p.put(ms("d"))
	p.pass()
	if got := p.vips(msKey("d")); !slices.Equal(got, []string{"10.0.0.4"}) {
		t.Fatalf("d got %v in quarantine, want 10.0.0.4", got)
	}

	// The quarantine ends: its lease goes, and next-fit still continues
	// from the cursor, which a new term restores from its lease.
	p.advance(quarantine)
	p.pass()
	if l, ok := p.leaseTable()["10.0.0.2"]; ok {
		t.Fatalf("lease of 10.0.0.2 after its quarantine = %+v, want none", l)
	}
	p.start()
	p.pass()
	p.put(ms("e"), ms("f"), ms("g"))
	p.pass()
	for name, want := range map[string]string{"a": "10.0.0.1", "c": "10.0.0.3", "d": "10.0.0.4", "e": "10.0.0.5", "f": "10.0.0.6", "g": "10.0.0.2"} {
		if got := p.vips(msKey(name)); !slices.Equal(got, []string{want}) {
			t.Errorf("%s has %v, want %s", name, got, want)
		}
	}
}

// BeforeFlush carries each pool's cursor when it differs from the one
// stored (or none is), and nothing otherwise.
func TestCore_BeforeFlushCarriesTheCursor(t *testing.T) {
	p := newPlanner(t, pool4("10.0.0.0/24"), []store.Lease{cursorLease("10.0.0.0/24", "10.0.0.5")})
	cursors := func(ops []store.Op) []string {
		var out []string
		for _, op := range ops {
			if op.Type != store.OpPutLease || !op.Lease.ExpiresAt.IsZero() {
				t.Fatalf("BeforeFlush returned %+v, want only cursor leases", op)
			}
			out = append(out, op.Lease.Name+"="+string(op.Lease.Value))
		}
		slices.Sort(out)
		return out
	}
	// The pools of the other kinds have no stored cursor yet.
	want := []string{"vipcursor/242.0.0.0/8=242.0.0.1", "vipcursor/243.0.0.0/8=243.0.0.1"}
	if diff := cmp.Diff(want, cursors(p.core.BeforeFlush())); diff != "" {
		t.Fatalf("first BeforeFlush (-want +got):\n%s", diff)
	}
	if ops := p.core.BeforeFlush(); len(ops) != 0 {
		t.Fatalf("BeforeFlush with every cursor stored = %v, want nothing", ops)
	}
	p.put(ms("a"))
	p.core.Dirty()
	p.core.Decide(p.objs[msKey("a")], resource.MustLookup(resource.MeshService).NewStatus())
	want = []string{"vipcursor/10.0.0.0/24=10.0.0.6"}
	if diff := cmp.Diff(want, cursors(p.core.BeforeFlush())); diff != "" {
		t.Fatalf("BeforeFlush after allocating 10.0.0.5 (-want +got):\n%s", diff)
	}
	if ops := p.core.BeforeFlush(); len(ops) != 0 {
		t.Fatalf("second BeforeFlush = %v, want nothing", ops)
	}
}

// Every service gets one VIP per family of its kind's pools; a
// MeshExternalService one more per family and distinct InternalVIP value,
// carrying it as hostname.
func TestCore_Slots(t *testing.T) {
	dual := defaultPools()
	dual[resource.MeshService] = Prefixes{V4: netip.MustParsePrefix("241.0.0.0/8"), V6: netip.MustParsePrefix("fd00:1::/64")}
	dual[resource.MeshExternalService] = Prefixes{V4: netip.MustParsePrefix("242.0.0.0/8"), V6: netip.MustParsePrefix("fd00:2::/64")}
	domain := mes("d")
	domain.Spec.(*resource.MeshExternalServiceSpec).Match = []resource.ExternalMatch{{Type: resource.MatchDomain, Value: "example.com", Port: 443, Protocol: "tls"}}
	twoPorts := mes("p", "one.ext.local", "one.ext.local")
	for _, tc := range []struct {
		name  string
		pools map[resource.Kind]Prefixes
		obj   *resource.Object
		want  []string
	}{
		{"MeshService", defaultPools(), ms("a"), []string{"241.0.0.1"}},
		{"MeshService, two families", dual, ms("a"), []string{"241.0.0.1", "fd00:1::1"}},
		{"MeshMultiZoneService, its own pool", dual, &resource.Object{Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "m", Spec: &resource.MeshMultiZoneServiceSpec{}}, []string{"243.0.0.1"}},
		{"MeshExternalService without InternalVIP", defaultPools(), mes("x"), []string{"242.0.0.1"}},
		{"MeshExternalService, a Domain match has no VIP", defaultPools(), domain, []string{"242.0.0.1"}},
		{"MeshExternalService, one per InternalVIP value", defaultPools(), mes("x", "one.ext.local", "two.ext.local"),
			[]string{"242.0.0.1", "242.0.0.2 one.ext.local", "242.0.0.3 two.ext.local"}},
		{"MeshExternalService, one value on two ports", defaultPools(), twoPorts, []string{"242.0.0.1", "242.0.0.2 one.ext.local"}},
		{"MeshExternalService, two families", dual, mes("x", "one.ext.local"),
			[]string{"242.0.0.1", "fd00:2::1", "242.0.0.2 one.ext.local", "fd00:2::2 one.ext.local"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanner(t, tc.pools, nil)
			p.pass()
			p.put(tc.obj)
			p.pass()
			k := tc.obj.Key()
			if diff := cmp.Diff(tc.want, p.vips(k)); diff != "" {
				t.Errorf("VIPs (-want +got):\n%s", diff)
			}
			if c, ok := p.condition(k); ok {
				t.Errorf("condition %+v, want none", c)
			}
			// Each managed VIP has an allocation lease naming its owner
			// and hostname.
			for _, v := range statusVIPs(p.objs[k]) {
				want := lease{Owner: ownerString(k), Hostname: v.Hostname}
				if got := p.leaseTable()[v.IP]; got != want {
					t.Errorf("lease of %s = %+v, want %+v", v.IP, got, want)
				}
			}
			// Nothing changed: the next decision is the same, with no op.
			p.put(p.objs[k])
			before := p.vips(k)
			if _, ops := p.pass(); len(ops) != 0 {
				t.Errorf("deciding again wrote %v", ops)
			}
			if diff := cmp.Diff(before, p.vips(k)); diff != "" {
				t.Errorf("VIPs changed on the second decision (-before +after):\n%s", diff)
			}
		})
	}
}

// An address the status shows is kept, inside the pool (with an
// allocation lease) or outside (not managed), and fills its family's slot.
func TestCore_KeepsAddressesTheStatusShows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    []string // ip or ip/Type
		want      []string
		wantLease map[string]lease
	}{{
		name:      "a ClusterIP outside the pools",
		status:    []string{"10.96.0.10/" + resource.VIPKubernetes},
		want:      []string{"10.96.0.10"},
		wantLease: map[string]lease{},
	}, {
		name:      "a free address inside the pool",
		status:    []string{"241.0.0.9/" + resource.VIPKubernetes},
		want:      []string{"241.0.0.9"},
		wantLease: map[string]lease{"241.0.0.9": {Owner: "MeshService/default/a"}},
	}, {
		name:      "a ClusterIP next to a Kuma VIP",
		status:    []string{"241.0.0.9", "10.96.0.10/" + resource.VIPKubernetes},
		want:      []string{"241.0.0.9", "10.96.0.10"},
		wantLease: map[string]lease{"241.0.0.9": {Owner: "MeshService/default/a"}},
	}, {
		name:      "an address that does not parse is dropped",
		status:    []string{"not-an-ip"},
		want:      []string{"241.0.0.1"},
		wantLease: map[string]lease{"241.0.0.1": {Owner: "MeshService/default/a"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanner(t, defaultPools(), nil)
			p.pass()
			p.put(withVIPs(ms("a"), tc.status...))
			p.pass()
			if diff := cmp.Diff(tc.want, p.vips(msKey("a"))); diff != "" {
				t.Errorf("VIPs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLease, p.leaseTable()); diff != "" {
				t.Errorf("leases (-want +got):\n%s", diff)
			}
			// Another service is not given the address kept.
			p.put(ms("b"))
			p.pass()
			if got := p.vips(msKey("b")); slices.ContainsFunc(got, func(ip string) bool { return slices.Contains(tc.want, ip) }) {
				t.Errorf("b got %v, which a holds", got)
			}
		})
	}

	// The pool is reconfigured: a VIP from the old pool stays, unmanaged.
	p := newPlanner(t, pool4("10.0.0.0/24"), []store.Lease{allocLease("241.0.0.1", "MeshService/default/a")}, withVIPs(ms("a"), "241.0.0.1"))
	_, ops := p.pass()
	if got := p.vips(msKey("a")); !slices.Equal(got, []string{"241.0.0.1"}) {
		t.Errorf("after the pool changed a has %v, want its 241.0.0.1", got)
	}
	if l, ok := p.leaseTable()["241.0.0.1"]; ok {
		t.Errorf("the lease of 241.0.0.1, outside every pool, is still %+v (ops %v)", l, ops)
	}
}

// A service whose status shows an address another service holds does not
// get it: it gets one of its own.
func TestCore_RefusesAnAddressAnotherServiceHolds(t *testing.T) {
	t.Run("while running", func(t *testing.T) {
		p := newPlanner(t, pool4("10.0.0.0/24"), nil)
		p.pass()
		p.put(ms("a"))
		p.pass()
		p.put(withVIPs(ms("b"), "10.0.0.1"))
		p.pass()
		if got := p.vips(msKey("b")); !slices.Equal(got, []string{"10.0.0.2"}) {
			t.Errorf("b has %v, want a new 10.0.0.2", got)
		}
		if got := p.vips(msKey("a")); !slices.Equal(got, []string{"10.0.0.1"}) {
			t.Errorf("a has %v, want its 10.0.0.1", got)
		}
		if got, want := p.leaseTable()["10.0.0.1"], (lease{Owner: "MeshService/default/a"}); got != want {
			t.Errorf("lease of 10.0.0.1 = %+v, want %+v", got, want)
		}
	})
	t.Run("two statuses at Start", func(t *testing.T) {
		p := newPlanner(t, pool4("10.0.0.0/24"), []store.Lease{allocLease("10.0.0.5", "MeshService/default/a")},
			withVIPs(ms("a"), "10.0.0.5"), withVIPs(ms("b"), "10.0.0.5"))
		p.pass()
		if got := p.vips(msKey("a")); !slices.Equal(got, []string{"10.0.0.5"}) {
			t.Errorf("a has %v, want its 10.0.0.5", got)
		}
		if got := p.vips(msKey("b")); !slices.Equal(got, []string{"10.0.0.1"}) {
			t.Errorf("b has %v, want a new 10.0.0.1", got)
		}
	})
	t.Run("an address in quarantine is kept", func(t *testing.T) {
		// Quarantine keeps addresses from being handed out; a status that
		// shows one (such as a ClusterIP Kubernetes gave again) names a
		// service that holds it, so it is kept and its lease becomes an
		// allocation.
		p := newPlanner(t, pool4("10.0.0.0/24"), nil)
		p.pass()
		p.put(ms("a"))
		p.pass()
		p.del(msKey("a"))
		p.pass()
		p.put(withVIPs(ms("c"), "10.0.0.1/"+resource.VIPKubernetes))
		p.pass()
		if got := p.vips(msKey("c")); !slices.Equal(got, []string{"10.0.0.1"}) {
			t.Errorf("c has %v, want its 10.0.0.1", got)
		}
		if got, want := p.leaseTable()["10.0.0.1"], (lease{Owner: "MeshService/default/c"}); got != want {
			t.Errorf("lease of 10.0.0.1 = %+v, want %+v", got, want)
		}
		if w := p.core.Wake(); !w.IsZero() {
			t.Errorf("Wake = %s, want none: no quarantine is left", w)
		}
	})
}
