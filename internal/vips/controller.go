// Package vips is the controller that gives services virtual IPs (seeds 000,
// 002, 003; ARCHITECTURE.md section 5): one address per family from the
// pool of the service's kind for MeshServices and MeshMultiZoneServices, and
// one per InternalVIP match (carrying its hostname) for
// MeshExternalServices, written into status.vips.
//
// Pools are shared by all meshes, so a VIP names one service in a zone. A
// VIP never changes while its service exists; an address already in status
// (a Kubernetes ClusterIP, or a VIP from a pool since reconfigured) is kept.
// A released VIP is quarantined: it is not handed out again for the
// quarantine period, so that no client still resolving the old name reaches
// a new service.
//
// A MeshService made from a Kubernetes Service keeps the addresses
// Kubernetes gave it (its ClusterIPs, or its Pod's IPs), which the
// Kubernetes controller writes; this controller neither allocates nor
// writes VIPs for it.
//
// Both allocations and quarantines are recorded as store leases named
// "vip/<ip>", written in the same transaction as the status that shows the
// VIP, so they survive restarts and leader changes. When the controller
// starts it rebuilds its pools from statuses and leases; an allocation lease
// whose service is gone (deleted while no controller ran) is quarantined
// from that moment, never shorter.
//
// Exhaustion is a condition on the services that could not get an address
// and a metric; the controller retries when addresses are released or
// leave quarantine, and never spins.
//
// It runs only on the leader. It imports resource, store, cache, ipam and
// reconcile.
package vips

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"
	"unique"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/ipam"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// LeasePrefix starts the name of every VIP lease; CursorLeasePrefix the
// lease holding each pool's allocation cursor.
const (
	LeasePrefix       = "vip/"
	CursorLeasePrefix = "vipcursor/"
)

// Condition reported on services that could not get every VIP.
const (
	ConditionAllocated = "VIPsAllocated"
	ReasonExhausted    = "PoolExhausted"
)

const retryDelay = 50 * time.Millisecond

var serviceKinds = []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService}

// Prefixes are the pools of one kind: an IPv4 prefix and, optionally, an
// IPv6 one (invalid when not configured).
type Prefixes struct {
	V4, V6 netip.Prefix
}

// Options configures a Controller.
type Options struct {
	Cache *cache.Cache
	Store store.Store
	// Pools by kind; every service kind must have a V4 pool.
	Pools      map[resource.Kind]Prefixes
	Quarantine time.Duration
	// Now is the clock (time.Now when nil).
	Now        func() time.Time
	Log        *slog.Logger
	Registerer prometheus.Registerer
	// BatchSize bounds the services written in one transaction.
	BatchSize int
	// ExpiryInterval is how often ended quarantines are looked for, so
	// that services waiting for an address get one soon after (1 s when 0;
	// the check costs a heap peek per pool).
	ExpiryInterval time.Duration
}

// Controller writes status.vips.
type Controller struct {
	o Options

	allocations *prometheus.CounterVec
	failures    *prometheus.CounterVec
	poolGauge   *prometheus.GaugeVec
	writes      *prometheus.CounterVec
}

// New returns a controller; it does no I/O.
func New(o Options) *Controller {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	if o.ExpiryInterval <= 0 {
		o.ExpiryInterval = time.Second
	}
	c := &Controller{
		o: o,
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_vips_allocations_total", Help: "VIPs handed out, by pool.",
		}, []string{"pool"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_vips_allocation_failures_total", Help: "VIPs that could not be handed out because the pool was exhausted, by pool.",
		}, []string{"pool"}),
		poolGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_vips_pool_addresses", Help: "Addresses of each pool: size, used, quarantined.",
		}, []string{"pool", "state"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_vips_status_writes_total", Help: "Status writes by result (ok, conflict, error).",
		}, []string{"result"}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.allocations, c.failures, c.poolGauge, c.writes)
	}
	return c
}

// family is one pool of one kind.
type family struct {
	name string // the pool's prefix, for metrics and messages
	v6   bool
	pool *ipam.Pool
	// cursor is the cursor last persisted; next-fit must continue where it
	// was after a restart, or addresses freed just before it would be the
	// first handed out again once their quarantine ends.
	cursor netip.Addr
}

// vip is one address held by a service. There is one per service and
// family, so it is kept to 48 bytes: the type is one of a few strings,
// interned, and the pool of a managed address is found from the address
// (pools do not overlap, and do not change within a term).
type vip struct {
	ip       netip.Addr
	hostname string
	typ      unique.Handle[string]
}

func newVIP(ip netip.Addr, typ, hostname string) vip {
	return vip{ip: ip, hostname: hostname, typ: unique.Make(typ)}
}

// state is what one leadership term knows.
//
// It holds one entry per service, so it keeps no more than it must: who
// holds a managed address is not recorded apart. A managed address in use
// (taken in its pool and not in quarantine) is always in the owned VIPs of
// exactly one service, which took it with Allocate or Reserve; Reserve
// refuses an address in use, so a service can only take one that is free
// or in quarantine. The pools thus answer "is it held by another service"
// and owned answers "is it held by this one".
type state struct {
	now      func() time.Time
	q        time.Duration
	families map[resource.Kind][]*family
	// owned are the VIPs of each service: what its status shows, or what
	// a status write that has not landed yet will show. Each slice has
	// exactly its length.
	owned map[resource.Key][]vip
	// waiting are services that lack a VIP because a pool is exhausted.
	waiting map[resource.Key]struct{}
	// written is what this term wrote of each service's status that the
	// cache does not show yet: status patches do not conflict, so an
	// event that arrives before the echo would otherwise write the same
	// VIPs again.
	written reconcile.Inflight[resource.Key, uint64] // digests (sum)
	digest  reconcile.Digest
}

// unchanged reports whether the store holds vips and conds in the status
// of k: our last write while its echo is on the way, else svc, the status
// of the cache's copy at revision rev. It also returns their digest.
func (st *state) unchanged(k resource.Key, rev int64, svc *resource.ServiceStatus, vips []resource.VIP, conds []resource.Condition) (bool, uint64) {
	sum := st.sum(vips, conds)
	if w, ok := st.written.Pending(k, rev); ok {
		return w == sum, sum
	}
	return slices.Equal(svc.VIPs, vips) && slices.Equal(svc.Conditions, conds), sum
}

// sum returns the digest of what the controller writes of a status.
func (st *state) sum(vips []resource.VIP, conds []resource.Condition) uint64 {
	st.digest.Reset()
	for _, v := range vips {
		st.digest.String(v.IP)
		st.digest.String(v.Type)
		st.digest.String(v.Hostname)
	}
	st.digest.String("") // a VIP has a non-empty IP: this ends the list
	for _, c := range conds {
		st.digest.String(c.Type)
		st.digest.String(c.Status)
		st.digest.String(c.Reason)
		st.digest.String(c.Message)
	}
	return st.digest.Sum()
}

// leaseValue is what a VIP lease records.
type leaseValue struct {
	Owner    string `json:"owner"` // Kind/mesh/name
	Hostname string `json:"hostname,omitempty"`
	Released bool   `json:"released,omitempty"`
}

func ownerString(k resource.Key) string { return string(k.Kind) + "/" + k.Mesh + "/" + k.Name }

func leaseName(ip netip.Addr) string { return LeasePrefix + ip.String() }

// Run keeps VIPs allocated until ctx ends. Call it only while leading.
func (c *Controller) Run(ctx context.Context) error {
	q := reconcile.New[resource.Key]()
	defer q.Close()
	cancel := c.o.Cache.Subscribe(func(keys []resource.Key) {
		for _, k := range keys {
			if slices.Contains(serviceKinds, k.Kind) {
				q.Add(k)
			}
		}
	})
	defer cancel()
	if !c.o.Cache.WaitSynced(ctx) {
		return nil
	}
	st, err := c.newState()
	if err != nil {
		return err
	}
	start := time.Now()
	keys, err := c.rebuild(ctx, st)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("vips: rebuild: %w", err)
	}
	c.process(ctx, st, q, keys)
	c.o.Log.Info("vips controller started", "services", len(keys), "dur", time.Since(start))

	expiry := time.NewTicker(c.o.ExpiryInterval)
	defer expiry.Stop()
	next := q.Batches(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-expiry.C:
			c.expire(ctx, st, q)
		case keys, ok := <-next:
			if !ok {
				return nil
			}
			c.process(ctx, st, q, keys)
		}
	}
}

func (c *Controller) newState() (*state, error) {
	st := &state{
		now: c.o.Now, q: c.o.Quarantine,
		families: map[resource.Kind][]*family{},
		owned:    map[resource.Key][]vip{},
		waiting:  map[resource.Key]struct{}{},
	}
	for _, k := range serviceKinds {
		prefixes, ok := c.o.Pools[k]
		if !ok || !prefixes.V4.IsValid() {
			return nil, fmt.Errorf("vips: no IPv4 pool for %s", k)
		}
		for _, p := range []netip.Prefix{prefixes.V4, prefixes.V6} {
			if !p.IsValid() {
				continue
			}
			pool, err := ipam.NewPool(p)
			if err != nil {
				return nil, fmt.Errorf("vips: pool %s of %s: %w", p, k, err)
			}
			st.families[k] = append(st.families[k], &family{name: p.String(), v6: p.Addr().Is6(), pool: pool})
		}
	}
	return st, nil
}

// findFamily returns the managed pool holding ip, if any.
func (st *state) findFamily(ip netip.Addr) *family {
	for _, fams := range st.families {
		for _, f := range fams {
			if f.pool.Contains(ip) {
				return f
			}
		}
	}
	return nil
}

// rebuild loads what is allocated and quarantined, and returns every
// service to reconcile.
func (c *Controller) rebuild(ctx context.Context, st *state) ([]resource.Key, error) {
	now := st.now()
	var keys []resource.Key
	// holder of each managed address in use, for this rebuild only: to
	// name the holder of an address two statuses show, and to tell the
	// leases of addresses in use.
	holder := map[netip.Addr]resource.Key{}
	for _, k := range serviceKinds {
		c.o.Cache.Scan(cache.Query{Kind: k}, func(obj *resource.Object) {
			keys = append(keys, obj.Key())
			var vs []vip
			for _, v := range statusVIPs(obj) {
				ip, err := netip.ParseAddr(v.IP)
				if err != nil {
					continue // reconcile drops it
				}
				f := st.findFamily(ip)
				if f != nil {
					if other, taken := holder[ip]; taken {
						c.o.Log.Warn("two services show the same VIP; the second will get a new one", "ip", ip, "name", obj.Name, "kind", obj.Kind, "mesh", obj.Mesh, "holder", other.String())
						continue
					}
					if err := f.pool.Reserve(ip); err != nil {
						c.o.Log.Warn("cannot reserve a VIP shown in status", "ip", ip, "name", obj.Name, "err", err)
						continue
					}
					holder[ip] = obj.Key()
				}
				vs = append(vs, newVIP(ip, v.Type, v.Hostname))
			}
			if vs != nil {
				st.owned[obj.Key()] = exact(vs)
			}
		})
	}
	cursors, err := c.o.Store.Leases(ctx, CursorLeasePrefix)
	if err != nil {
		return nil, err
	}
	for _, l := range cursors {
		for _, fams := range st.families {
			for _, f := range fams {
				ip, err := netip.ParseAddr(string(l.Value))
				if l.Name == CursorLeasePrefix+f.name && err == nil && f.pool.SetCursor(ip) == nil {
					f.cursor = ip
				}
			}
		}
	}
	leases, err := c.o.Store.Leases(ctx, LeasePrefix)
	if err != nil {
		return nil, err
	}
	var ops []store.Op
	for _, l := range leases {
		ip, err := netip.ParseAddr(l.Name[len(LeasePrefix):])
		if err != nil {
			ops = append(ops, store.Op{Type: store.OpDeleteLease, Lease: &store.Lease{Name: l.Name}})
			continue
		}
		if _, live := holder[ip]; live {
			continue // in use; its allocation lease stays
		}
		f := st.findFamily(ip)
		until := l.ExpiresAt
		if until.IsZero() {
			// An allocation whose service is gone: it was released while
			// no controller ran, at a moment we do not know. Quarantine
			// from now, which is never shorter than required.
			until = now.Add(st.q)
			var val leaseValue
			_ = json.Unmarshal(l.Value, &val)
			val.Released = true
			ops = append(ops, putLease(ip, val, until))
		}
		if !until.After(now) || f == nil {
			ops = append(ops, store.Op{Type: store.OpDeleteLease, Lease: &store.Lease{Name: l.Name}})
			continue
		}
		if err := f.pool.Quarantine(ip, until); err != nil {
			c.o.Log.Warn("cannot restore a quarantined VIP", "ip", ip, "err", err)
		}
	}
	if len(ops) > 0 {
		if _, err := c.o.Store.Apply(ctx, ops...); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

func putLease(ip netip.Addr, v leaseValue, until time.Time) store.Op {
	b, _ := json.Marshal(v)
	return store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: leaseName(ip), Value: b, ExpiresAt: until}}
}

func statusVIPs(obj *resource.Object) []resource.VIP {
	if st, ok := obj.Status.(resource.ServiceStatusOf); ok && st != nil {
		return st.Service().VIPs
	}
	return nil
}

// slot is one VIP a service should have.
type slot struct {
	hostname string
	v6       bool
}

// slots lists the VIPs obj should have: one per family for MeshService and
// MeshMultiZoneService, one per family and InternalVIP match for
// MeshExternalService (seed 003).
func (st *state) slots(obj *resource.Object) []slot {
	var hosts []string
	if obj.Kind == resource.MeshExternalService {
		for _, m := range obj.Spec.(*resource.MeshExternalServiceSpec).Match {
			if m.Type == resource.MatchInternalVIP && !slices.Contains(hosts, m.Value) {
				hosts = append(hosts, m.Value)
			}
		}
	} else {
		hosts = []string{""}
	}
	var out []slot
	for _, h := range hosts {
		for _, f := range st.families[obj.Kind] {
			out = append(out, slot{hostname: h, v6: f.v6})
		}
	}
	return out
}

// process reconciles keys and writes what changed.
func (c *Controller) process(ctx context.Context, st *state, q *reconcile.Queue[resource.Key], keys []resource.Key) {
	// The queue hands out a batch in map order; allocate in key order so
	// that the same batch always gives the same addresses.
	slices.SortFunc(keys, func(a, b resource.Key) int { return cmp.Compare(a.String(), b.String()) })
	// Write as the batches fill rather than after the last key: a first
	// pass over 100,000 services would otherwise hold 100,000 copies of
	// them at once, and the heap that peak leaves scattered stays. Each
	// batch carries the cursors as they stand after it.
	defer c.updateGauges(st)
	var ops []store.Op
	statuses := 0
	for _, k := range keys {
		for _, op := range c.reconcile(st, k) {
			ops = append(ops, op)
			if op.Type == store.OpPatchStatus {
				statuses++
			}
		}
		if statuses < c.o.BatchSize {
			continue
		}
		ops = c.appendCursors(st, ops)
		if !c.write(ctx, st, q, ops) {
			return
		}
		clear(ops)
		ops, statuses = ops[:0], 0
	}
	c.write(ctx, st, q, c.appendCursors(st, ops))
}

// appendCursors appends to ops the writes of the pool cursors that moved
// since they were last written.
func (c *Controller) appendCursors(st *state, ops []store.Op) []store.Op {
	for _, fams := range st.families {
		for _, f := range fams {
			if cur := f.pool.Cursor(); cur != f.cursor {
				f.cursor = cur
				ops = append(ops, store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: CursorLeasePrefix + f.name, Value: []byte(cur.String())}})
			}
		}
	}
	return ops
}

// reconcile computes the VIPs of service k and returns the writes: its
// status (when it changes) and the leases of what it took and released.
func (c *Controller) reconcile(st *state, k resource.Key) []store.Op {
	obj, ok := c.o.Cache.Peek(k) // read only: cloned before writing
	now := st.now()
	if !ok {
		// Deleted: quarantine everything it held.
		var ops []store.Op
		for _, v := range st.owned[k] {
			ops = append(ops, c.release(st, k, v, now)...)
		}
		delete(st.owned, k)
		delete(st.waiting, k)
		st.written.Forget(k)
		return ops
	}
	if platformAddressed(obj) {
		// seed 000: a MeshService made from a Kubernetes Service has its
		// VIPs already (the ClusterIP, or its Pod's IPs), and the Kubernetes
		// controller writes them: nothing to allocate or write here.
		return nil
	}
	var ops []store.Op
	have := st.owned[k]
	// Addresses the status shows that we did not know (someone else wrote
	// them, such as a Kubernetes ClusterIP): keep them.
	for _, v := range statusVIPs(obj) {
		ip, err := netip.ParseAddr(v.IP)
		if err != nil || slices.ContainsFunc(have, func(h vip) bool { return h.ip == ip }) {
			continue
		}
		f := st.findFamily(ip)
		if f != nil {
			// Not in have, so not held by k: free, in quarantine, or held by
			// another service, which Reserve refuses (not ours to keep).
			if err := f.pool.Reserve(ip); err != nil {
				continue
			}
			ops = append(ops, putLease(ip, leaseValue{Owner: ownerString(k), Hostname: v.Hostname}, time.Time{}))
		}
		have = append(have, newVIP(ip, v.Type, v.Hostname))
	}
	// Keep what fills a slot; release managed VIPs that no longer do
	// (a MeshExternalService InternalVIP match that was removed).
	free := st.slots(obj)
	var buf [4]vip
	want := buf[:0]
	for _, v := range have {
		i := slices.IndexFunc(free, func(s slot) bool { return s.hostname == v.hostname && s.v6 == v.ip.Is6() })
		switch {
		case i >= 0:
			want = append(want, v)
			free = slices.Delete(free, i, i+1)
		case obj.Kind != resource.MeshExternalService && v.hostname == "":
			// A second address of a family (such as a ClusterIP next to a
			// Kuma VIP) is kept: a VIP never changes while its service exists.
			want = append(want, v)
		default:
			ops = append(ops, c.release(st, k, v, now)...)
		}
	}
	exhausted := ""
	for _, s := range free {
		f := st.familyOf(obj.Kind, s.v6)
		ip, err := f.pool.Allocate(now)
		if err != nil {
			c.failures.WithLabelValues(f.name).Inc()
			exhausted = exhaustedMessage(obj.Kind, f.name, err)
			continue
		}
		c.allocations.WithLabelValues(f.name).Inc()
		v := newVIP(ip, resource.VIPKuma, s.hostname)
		want = append(want, v)
		ops = append(ops, putLease(ip, leaseValue{Owner: ownerString(k), Hostname: s.hostname}, time.Time{}))
	}
	if old, ok := st.owned[k]; !ok || !slices.Equal(want, old) {
		st.owned[k] = exact(want)
	}
	if exhausted != "" {
		st.waiting[k] = struct{}{}
	} else {
		delete(st.waiting, k)
	}

	// Write the status when it differs.
	status := resource.ServiceStatusOrNew(obj)
	svc := status.Service()
	vips := toStatus(want)
	conds := withCondition(svc.Conditions, exhausted)
	same, sum := st.unchanged(k, obj.Revision, svc, vips, conds)
	if same {
		return ops
	}
	st.written.Put(k, sum)
	obj = obj.Clone()
	status = resource.ServiceStatusOrNew(obj)
	svc = status.Service()
	svc.VIPs, svc.Conditions = vips, conds
	obj.Status = status
	return append(ops, store.Op{Type: store.OpPatchStatus, Object: obj, Patch: statusPatch, DiscardObject: true})
}

// platformAddressed reports whether obj's VIPs come from the platform: a
// MeshService made from a Kubernetes Service (kuma.io/managed-by:
// k8s-controller), whose ClusterIP or Pod IPs that controller writes.
func platformAddressed(obj *resource.Object) bool {
	return obj.Kind == resource.MeshService && obj.Labels[resource.LabelManagedBy] == resource.ManagedByKubernetes
}

// exact returns a copy of vs of exactly its length, or nil when vs is
// empty: owned keeps a service's VIPs for as long as the service lives.
func exact(vs []vip) []vip {
	if len(vs) == 0 {
		return nil
	}
	out := make([]vip, len(vs))
	copy(out, vs)
	return out
}

// exhaustedMessage says which pool is full and when it may have room.
func exhaustedMessage(k resource.Kind, pool string, err error) string {
	var ex *ipam.ExhaustedError
	if !errors.As(err, &ex) {
		return fmt.Sprintf("cannot allocate from the %s pool %s: %v", k, pool, err)
	}
	if ex.Quarantined == 0 {
		return fmt.Sprintf("the %s pool %s is exhausted: all %d addresses are in use", k, pool, ex.Size)
	}
	return fmt.Sprintf("the %s pool %s is exhausted: %d of its %d addresses are in quarantine, the first until %s",
		k, pool, ex.Quarantined, ex.Size, ex.NextExpiry.UTC().Format(time.RFC3339))
}

func (st *state) familyOf(k resource.Kind, v6 bool) *family {
	for _, f := range st.families[k] {
		if f.v6 == v6 {
			return f
		}
	}
	return nil
}

// release frees a managed VIP of service k into quarantine. A managed VIP
// in owned is one k took: see state.
func (c *Controller) release(st *state, k resource.Key, v vip, now time.Time) []store.Op {
	f := st.findFamily(v.ip)
	if f == nil {
		return nil // outside every pool: kept, not managed
	}
	until := now.Add(st.q)
	if err := f.pool.Release(v.ip, until); err != nil {
		c.o.Log.Warn("releasing a VIP", "ip", v.ip, "err", err)
	}
	return []store.Op{putLease(v.ip, leaseValue{Owner: ownerString(k), Hostname: v.hostname, Released: true}, until)}
}

func toStatus(vs []vip) []resource.VIP {
	if len(vs) == 0 {
		return nil
	}
	out := make([]resource.VIP, len(vs))
	for i, v := range vs {
		out[i] = resource.VIP{IP: v.ip.String(), Type: v.typ.Value(), Hostname: v.hostname}
	}
	return out
}

// withCondition sets or clears the exhaustion condition, leaving others.
func withCondition(conds []resource.Condition, exhausted string) []resource.Condition {
	out := slices.DeleteFunc(slices.Clone(conds), func(c resource.Condition) bool { return c.Type == ConditionAllocated })
	if exhausted != "" {
		out = append(out, resource.Condition{Type: ConditionAllocated, Status: resource.ConditionFalse, Reason: ReasonExhausted, Message: exhausted})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// statusPatch is what the VIP controller owns of a status: the VIPs and
// its exhaustion condition. Writing only those, unversioned, keeps it from
// conflicting with the other controllers that write the same statuses.
var statusPatch = &store.StatusPatch{Fields: []string{"vips"}, Conditions: []string{ConditionAllocated}}

// write commits ops in batches: each batch holds whole services (their
// status write and its leases together).
//
// It returns false when writing must stop: another instance leads, or ctx
// ended.
func (c *Controller) write(ctx context.Context, st *state, q *reconcile.Queue[resource.Key], ops []store.Op) bool {
	for len(ops) > 0 {
		n, statuses := 0, 0
		for n < len(ops) && (statuses < c.o.BatchSize || ops[n].Type != store.OpPatchStatus) {
			if ops[n].Type == store.OpPatchStatus {
				statuses++
			}
			n++
		}
		batch := ops[:n]
		ops = ops[n:]
		results, err := c.o.Store.Apply(ctx, batch...)
		if err != nil {
			if errors.Is(err, store.ErrFenced) {
				// Another instance leads: our work is being stopped, and the
				// new leader rebuilds from what the store holds.
				c.o.Log.Info("no longer the leader: dropping the VIP writes", "ops", len(batch)+len(ops))
				return false
			}
			if ctx.Err() != nil {
				return false
			}
			c.o.Log.Warn("writing VIPs failed; will retry", "ops", len(batch), "err", err)
			for _, op := range batch {
				if op.Type == store.OpPatchStatus {
					st.written.Forget(op.Object.Key())
					c.writes.WithLabelValues("error").Inc()
					q.AddAfter(time.Second, op.Object.Key())
				}
			}
			continue
		}
		for i, r := range results {
			op := batch[i]
			if op.Type == store.OpPatchStatus {
				if r.Err == nil {
					st.written.Written(op.Object.Key(), r.Revision)
				} else {
					st.written.Forget(op.Object.Key())
				}
			}
			switch {
			case r.Err == nil:
				if op.Type == store.OpPatchStatus {
					c.writes.WithLabelValues("ok").Inc()
				}
			case op.Type != store.OpPatchStatus:
				c.o.Log.Warn("writing a VIP lease failed", "lease", op.Lease.Name, "err", r.Err)
			case errors.Is(r.Err, store.ErrNotFound):
				// deleted meanwhile; its deletion event releases the VIPs
			case errors.Is(r.Err, store.ErrConflict):
				c.writes.WithLabelValues("conflict").Inc()
				q.AddAfter(retryDelay, op.Object.Key())
			default:
				c.writes.WithLabelValues("error").Inc()
				c.o.Log.Warn("writing VIPs failed; will retry", "kind", op.Object.Kind, "mesh", op.Object.Mesh, "name", op.Object.Name, "err", r.Err)
				q.AddAfter(time.Second, op.Object.Key())
			}
		}
	}
	return true
}

// expire ends quarantines, deletes their leases, and retries the services
// that were waiting for an address.
func (c *Controller) expire(ctx context.Context, st *state, q *reconcile.Queue[resource.Key]) {
	now := st.now()
	var ops []store.Op
	for _, fams := range st.families {
		for _, f := range fams {
			for _, ip := range f.pool.Expire(now) {
				ops = append(ops, store.Op{Type: store.OpDeleteLease, Lease: &store.Lease{Name: leaseName(ip)}})
			}
		}
	}
	if len(ops) > 0 {
		if _, err := c.o.Store.Apply(ctx, ops...); err != nil && ctx.Err() == nil {
			c.o.Log.Warn("deleting ended quarantines", "err", err)
		}
	}
	if len(st.waiting) > 0 && len(ops) > 0 {
		waiting := make([]resource.Key, 0, len(st.waiting))
		for k := range st.waiting {
			waiting = append(waiting, k)
		}
		slices.SortFunc(waiting, func(a, b resource.Key) int { return cmp.Compare(a.String(), b.String()) })
		q.Add(waiting...)
	}
	c.updateGauges(st)
}

func (c *Controller) updateGauges(st *state) {
	now := st.now()
	for _, fams := range st.families {
		for _, f := range fams {
			size, used, quarantined := f.pool.Stats(now)
			c.poolGauge.WithLabelValues(f.name, "size").Set(float64(size))
			c.poolGauge.WithLabelValues(f.name, "used").Set(float64(used))
			c.poolGauge.WithLabelValues(f.name, "quarantined").Set(float64(quarantined))
		}
	}
}
