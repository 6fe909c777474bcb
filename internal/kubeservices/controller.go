// Package kubeservices makes MeshServices from Kubernetes Services
// (kuma-facts 11.2; seeds 000, 002, 004): Translate is the pure rule, table
// tested; Controller follows Services, namespaces and EndpointSlices and
// writes what Translate says into the store, leaving every MeshService it
// did not make (no kuma.io/managed-by: k8s-controller label) alone, even
// one in its way.
//
// The VIPs of its MeshServices are the Service's ClusterIPs, or a headless
// Service's Pod IPs (seed 000: a Kubernetes Service has its VIP already):
// it hands them to the VIP controller, the one writer of status.vips,
// before it creates the MeshService, so that the first status write
// carries them with the hostnames.
//
// Every MeshService it writes goes through admission first, as every
// writer's does. It runs only on the leader. It imports admission,
// resource, store, cache, reconcile, validate, crd, kubeapi and s2dict. Controller.Run's loop is single-threaded; the
// watches feed it through locked views.
package kubeservices

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Options configures a Controller.
type Options struct {
	Client *kubeapi.Client
	Store  store.Store
	Cache  *cache.Cache
	// Admission admits every MeshService before it is written, as every
	// writer's are (the control plane's own, admission.System).
	Admission *admission.Admitter
	// VIPs takes the addresses Kubernetes gave each MeshService (the VIP
	// controller, which writes them), and Kick wakes the controllers that
	// write them.
	VIPs VIPs
	Kick func()
	// ExportDefault is spec.export.mode of a Service without the
	// kuma.io/export-mode annotation.
	ExportDefault   string
	SystemNamespace string
	Log             *slog.Logger
	Registerer      prometheus.Registerer
	// BatchSize bounds the writes of one Apply (500).
	BatchSize int
	// FirstPass, when set, is told how many Services the controller looks
	// at first, when it starts, and the function it returns once it has
	// written what they need: a first start names every Service of the
	// cluster, which the server treats as the load of a start (loadGC).
	FirstPass func(services int) (done func())
}

// VIPs is where the controller hands over the VIPs of its MeshServices:
// vips.Core, the one writer of status.vips, which keeps them until the
// status shows them. The controller hands over those of a MeshService it
// creates, or whose status shows others, and nil (forget) for one whose
// status shows them.
type VIPs interface {
	SetPlatformVIPs(k resource.Key, vips []resource.VIP)
}

// Controller writes the MeshServices of Services.
type Controller struct {
	o Options

	writes     *prometheus.CounterVec
	managed    prometheus.Gauge
	reconciles prometheus.Counter
}

// New returns a controller; it does no I/O.
func New(o Options) *Controller {
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	c := &Controller{
		o: o,
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_kubeservices_writes_total", Help: "Writes of MeshServices made from Kubernetes Services, by operation and result.",
		}, []string{"op", "result"}),
		managed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_kubeservices_meshservices", Help: "MeshServices made from Kubernetes Services.",
		}),
		reconciles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshnames_kubeservices_reconciles_total", Help: "Services whose MeshServices were worked out again.",
		}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.writes, c.managed, c.reconciles)
	}
	return c
}

// nsName names a namespaced object.
type nsName struct{ ns, name string }

func (n nsName) String() string { return n.ns + "/" + n.name }

// state is what one leadership term knows of the MeshServices.
type state struct {
	// system is the control plane's namespace, whose Services' MeshServices
	// are named without it (translate's add).
	system string
	// owned are the names of the MeshServices made from each Service, by
	// the labels the cache shows, other than the one named after the
	// Service itself (canonical): a headless Service's per-Pod ones, or a
	// MeshService whose labels name another Service. byName gives their
	// meshes. Nearly every Service has only its canonical MeshService, and
	// keeping it here too cost about 100 bytes per Service.
	owned map[nsName][]string
	// byName are the MeshServices of every mesh by name (a name is one
	// custom resource, in one mesh at a time): the mesh, and for those
	// this controller made, their Service and the digest of their labels
	// and spec, so that status writes do not send the Service round again.
	// One map keyed by the name alone: the controller holds an entry per
	// Service of the cluster.
	byName map[string]meshService
	// managed counts the entries of byName this controller made.
	managed int
	// pods caches the Pods of headless Services' endpoints, by UID.
	pods map[string]*Pod
	// reported is the last problem logged for each Service.
	reported map[nsName]string
	// conflicts are the MeshServices in a Service's way (logged once), and
	// the Service they are in the way of.
	conflicts map[resource.Key]nsName
}

// meshService is what the controller knows of a MeshService: its mesh,
// and when it made it (made), the Service it made it from and the digest
// of what it writes of it (intentSum).
type meshService struct {
	mesh  string
	made  bool
	owner nsName
	sum   uint64
}

// canonical returns the name of the MeshService named after Service svc
// (translate's add): name.namespace, or the name alone in the system
// namespace.
func (st *state) canonical(svc nsName) string {
	if svc.ns == st.system {
		return svc.name
	}
	return svc.name + "." + svc.ns
}

// canonicalOwner reports whether name is the canonical name of Service
// svc, and returns svc with its strings those of name (and of system),
// which the store's key already holds: the labels' copies would be two
// more allocations per Service kept for as long as it exists.
func (st *state) canonicalOwner(name string, svc nsName) (nsName, bool) {
	switch {
	case svc.ns == st.system:
		if name == svc.name {
			return nsName{st.system, name}, true
		}
	case len(name) == len(svc.name)+1+len(svc.ns) && name[len(svc.name)] == '.' &&
		name[:len(svc.name)] == svc.name && name[len(svc.name)+1:] == svc.ns:
		return nsName{name[len(svc.name)+1:], name[:len(svc.name)]}, true
	}
	return svc, false
}

// madeFrom returns the names of the MeshServices made from Service svc.
func (st *state) madeFrom(svc nsName) []string {
	names := st.owned[svc]
	c := st.canonical(svc)
	if ms := st.byName[c]; ms.made && ms.owner == svc {
		names = append([]string{c}, names...)
	}
	return names
}

// named returns the key of the MeshService of any mesh named name.
func (st *state) named(name string) (resource.Key, bool) {
	ms, ok := st.byName[name]
	return resource.Key{Kind: resource.MeshService, Mesh: ms.mesh, Name: name}, ok
}

// disown forgets that the Service ms was made from owns the MeshService
// named name, and queues that Service on q (unless nil).
func (st *state) disown(name string, ms meshService, q *reconcile.Queue[nsName]) {
	st.managed--
	if q != nil {
		q.Add(ms.owner)
	}
	if _, ok := st.canonicalOwner(name, ms.owner); ok {
		return
	}
	st.owned[ms.owner] = slices.DeleteFunc(st.owned[ms.owner], func(n string) bool { return n == name })
	if len(st.owned[ms.owner]) == 0 {
		delete(st.owned, ms.owner)
	}
}

// Run keeps the MeshServices of Services until ctx ends. Call it only
// while leading.
func (c *Controller) Run(ctx context.Context) error {
	svcQueue := reconcile.New[nsName]()
	defer svcQueue.Close()
	msQueue := reconcile.New[resource.Key]()
	defer msQueue.Close()
	cancel := c.o.Cache.Subscribe(func(keys []resource.Key) {
		for _, k := range keys {
			if k.Kind == resource.MeshService || k.Kind == resource.Mesh {
				msQueue.Add(k)
			}
		}
	})
	defer cancel()
	if !c.o.Cache.WaitSynced(ctx) {
		return nil
	}
	v := &views{
		services: map[nsName]Packed{}, namespaces: map[string]Namespace{},
		slices: map[nsName]slice{}, bySvc: map[nsName]map[nsName]bool{}, exports: map[nsName]bool{}, synced: map[string]bool{},
		queue: svcQueue, log: c.o.Log,
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	follow := []struct {
		r kubeapi.Resource
		h kubeapi.Handler
	}{{kubeapi.Namespaces, namespaceHandler{v}}, {kubeapi.Services, serviceHandler{v}}, {kubeapi.EndpointSlices, sliceHandler{v}}}
	// The MCS API is optional: without it (kubemcs says so in the log)
	// no ServiceExport exports anything.
	if ok, err := c.o.Client.Serves(ctx, crd.ServiceExports); err != nil {
		c.o.Log.Warn("kubernetes: cannot tell whether the MCS API is served; ServiceExports are not read", "err", err)
	} else if ok {
		follow = append(follow, struct {
			r kubeapi.Resource
			h kubeapi.Handler
		}{crd.ServiceExports, exportHandler{v}})
	}
	for _, w := range follow {
		wg.Go(func() { c.o.Client.Follow(wctx, w.r, "", kubeapi.ListOptions{}, "", w.h, c.o.Log) })
	}
	start := time.Now()
	if !c.waitViews(ctx, v, len(follow)) {
		return nil
	}
	st := &state{system: c.o.SystemNamespace, owned: map[nsName][]string{}, byName: map[string]meshService{},
		pods: map[string]*Pod{}, reported: map[nsName]string{}, conflicts: map[resource.Key]nsName{}}
	c.o.Cache.Scan(cache.Query{Kind: resource.MeshService}, func(o *resource.Object) {
		c.index(st, o.Key(), o, svcQueue)
	})
	c.o.Log.Info("kubeservices controller started", "services", svcQueue.Len(), "meshservices", st.managed, "dur", time.Since(start))
	firstPassDone := func() {}
	if c.o.FirstPass != nil {
		firstPassDone = c.o.FirstPass(svcQueue.Len())
	}
	defer firstPassDone()
	svcBatches := svcQueue.Batches(ctx)
	msBatches := msQueue.Batches(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case keys, ok := <-msBatches:
			if !ok {
				return nil
			}
			for _, k := range keys {
				if k.Kind == resource.Mesh {
					v.mu.Lock()
					for s := range v.services {
						svcQueue.Add(s)
					}
					v.mu.Unlock()
					continue
				}
				o, _ := c.o.Cache.Peek(k)
				c.index(st, k, o, svcQueue)
			}
		case keys, ok := <-svcBatches:
			if !ok {
				return nil
			}
			if !c.process(ctx, st, v, svcQueue, keys) {
				return nil
			}
			firstPassDone() // the first batch holds every Service queued at the start
		}
	}
}

// waitViews waits until every watch has listed once.
func (c *Controller) waitViews(ctx context.Context, v *views, n int) bool {
	for {
		v.mu.Lock()
		done := len(v.synced) == n
		v.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// made reports whether o is a MeshService this controller made: labelled
// kuma.io/managed-by: k8s-controller, and not a copy of another zone's
// (kuma.io/origin: global), which keeps that label and its Service's name
// and namespace labels but belongs to the zone sync.
func made(o *resource.Object) bool {
	return o != nil && o.Labels[resource.LabelManagedBy] == ManagedBy && o.Labels[resource.LabelOrigin] != resource.OriginGlobal
}

// index records the MeshService k (nil: deleted) and queues the Service
// it was made from, so that an edit or a deletion of it is undone.
func (c *Controller) index(st *state, k resource.Key, o *resource.Object, q *reconcile.Queue[nsName]) {
	var owner nsName
	var sum uint64
	managed := made(o)
	if managed {
		owner = nsName{o.Labels[resource.LabelNamespace], o.Labels[resource.LabelServiceName]}
		sum = intentSum(o)
	}
	c.record(st, k, o != nil, managed, owner, sum, q)
}

// record records that MeshService k exists (or not), made by this
// controller from Service owner (managed) with intent digest sum, and
// queues on q the Services whose MeshServices that changes; q is nil for
// what the controller just wrote itself, whose echo then changes nothing.
func (c *Controller) record(st *state, k resource.Key, exists, managed bool, owner nsName, sum uint64, q *reconcile.Queue[nsName]) {
	canonical := false
	if managed {
		owner, canonical = st.canonicalOwner(k.Name, owner)
	}
	// prev is k's entry, or the entry of the same custom resource in
	// another mesh when its move there is seen before its deletion here.
	prev, had := st.byName[k.Name]
	mine := had && prev.mesh == k.Mesh
	if mine && prev.made && managed && prev.owner == owner && prev.sum == sum {
		return // a status write, or the echo of this controller's write
	}
	switch {
	case !exists:
		if mine {
			if prev.made {
				st.disown(k.Name, prev, q)
			}
			delete(st.byName, k.Name)
		}
		if svc, ok := st.conflicts[k]; ok {
			delete(st.conflicts, k)
			if q != nil {
				q.Add(svc) // out of that Service's way
			}
		}
	default:
		if had && prev.made {
			st.disown(k.Name, prev, q)
		}
		st.byName[k.Name] = meshService{mesh: k.Mesh, made: managed, owner: owner, sum: sum}
		if managed {
			if !canonical {
				st.owned[owner] = append(st.owned[owner], k.Name)
			}
			st.managed++
			if q != nil {
				q.Add(owner)
			}
		}
	}
	c.managed.Set(float64(st.managed))
}

// intentSum digests what the controller writes of a MeshService: its
// labels and spec. The labels the store computes are left out (as
// sameLabels leaves them out), so that the digest of a MeshService as the
// controller writes it is that of the same MeshService read back.
func intentSum(o *resource.Object) uint64 {
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		if slices.Contains(computed, k) {
			continue
		}
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(o.Labels[k]))
		h.Write([]byte{0})
	}
	spec, _ := resource.MarshalSpec(o.Spec)
	h.Write(spec)
	return h.Sum64()
}

// plan is the writes of a batch: deletes first (a MeshService moving to
// another mesh is the same custom resource), then the rest.
type plan struct {
	deletes, writes []store.Op
	services        map[resource.Key]nsName
	// sums are the intent digests of what writes create or update.
	sums map[resource.Key]uint64
	// kick: VIPs of existing MeshServices were handed over.
	kick bool
}

func newPlan() *plan {
	return &plan{services: map[resource.Key]nsName{}, sums: map[resource.Key]uint64{}}
}

// process reconciles a batch of Services. It returns false when the
// controller must stop (fenced, or ctx ended).
func (c *Controller) process(ctx context.Context, st *state, v *views, q *reconcile.Queue[nsName], keys []nsName) bool {
	slices.SortFunc(keys, func(a, b nsName) int { return strings.Compare(a.String(), b.String()) })
	p := newPlan()
	// New VIPs of MeshServices that exist have no event of their own to
	// wake the runner that writes them (those of new MeshServices come
	// with their creation).
	defer func() {
		if p.kick {
			c.o.Kick()
		}
	}()
	for _, k := range keys {
		c.reconcile(ctx, st, v, k, p)
		if len(p.deletes)+len(p.writes) >= c.o.BatchSize {
			if !c.write(ctx, st, q, p) {
				return false
			}
			p = newPlan()
		}
	}
	return c.write(ctx, st, q, p)
}

// reconcile adds to p the writes that give Service k its MeshServices.
func (c *Controller) reconcile(ctx context.Context, st *state, v *views, k nsName, p *plan) {
	c.reconciles.Inc()
	v.mu.Lock()
	packed, ok := v.services[k]
	var svc Service
	if ok {
		var err error
		if svc, err = packed.Unpack(k.ns, k.name); err != nil {
			c.o.Log.Error("kubernetes: a Service could not be read back", "err", err)
			ok = false
		}
	}
	svc.Exported = v.exports[k]
	var in Input
	if ok {
		in = Input{Service: svc, ExportDefault: c.o.ExportDefault, SystemNamespace: c.o.SystemNamespace,
			MeshExists: func(m string) bool {
				_, ok := c.o.Cache.Peek(resource.Key{Kind: resource.Mesh, Name: m})
				return ok
			}}
		if ns, ok := v.namespaces[k.ns]; ok {
			in.Namespace = &ns
		}
	}
	var refs []sliceEndpoint
	for sk := range v.bySvc[k] {
		refs = append(refs, v.slices[sk].endpoints...)
	}
	v.mu.Unlock()
	var out Output
	if ok {
		in.Endpoints = c.endpoints(ctx, st, svc, refs)
		out = Translate(in)
	}
	problem := strings.Join(out.Problems, "; ")
	if problem != st.reported[k] {
		if problem != "" {
			c.o.Log.Warn("a Service's MeshService leaves something out", "namespace", k.ns, "service", k.name, "problems", problem)
		}
		st.reported[k] = problem
	}
	want := map[resource.Key]*resource.Object{}
	vips := map[resource.Key][]resource.VIP{}
	for _, o := range out.Services {
		// The VIPs go to the VIP controller, which writes them (with the
		// hostnames, in one status write); the object is created without.
		vips[o.Key()] = o.Status.(*resource.ServiceStatus).VIPs
		o.Status = nil
		if errs := c.o.Admission.Admit(o, writer); len(errs) > 0 {
			problem := fmt.Sprintf("MeshService %s not admitted: %v", o.Key(), errs)
			if st.reported[k] != problem {
				c.o.Log.Warn("a Service's MeshService is not admitted", "namespace", k.ns, "service", k.name, "err", errs)
				st.reported[k] = problem
			}
			continue
		}
		want[o.Key()] = o
	}
	for _, name := range st.madeFrom(k) {
		key, _ := st.named(name)
		if _, ok := want[key]; !ok {
			p.deletes = append(p.deletes, store.Op{Type: store.OpDelete, Key: key})
			p.services[key] = k
		}
	}
	for key, o := range want {
		if ms, ok := st.byName[key.Name]; ok && ms.mesh != key.Mesh && ms.made && ms.owner == k {
			// The same custom resource in another mesh: deleted above,
			// created again once that is done.
			c.o.VIPs.SetPlatformVIPs(key, vips[key])
			p.writes = append(p.writes, store.Op{Type: store.OpCreate, Object: o, DiscardObject: true})
			p.services[key], p.sums[key] = k, intentSum(o)
			continue
		}
		cur, exists := c.o.Cache.Peek(key)
		in := key
		if !exists {
			in, exists = st.named(key.Name) // the same object, in another mesh
		}
		if exists && !made(cur) {
			if _, logged := st.conflicts[in]; !logged {
				c.o.Log.Warn("a MeshService that was not made from this Service has its name; leaving it alone", "namespace", k.ns, "service", k.name, "meshservice", in.String())
			}
			st.conflicts[in] = k
			continue
		}
		if !exists {
			c.o.VIPs.SetPlatformVIPs(key, vips[key])
			p.writes = append(p.writes, store.Op{Type: store.OpCreate, Object: o, DiscardObject: true})
			p.services[key], p.sums[key] = k, intentSum(o)
			continue
		}
		if !sameLabels(cur.Labels, o.Labels) || !specEqual(cur.Spec, o.Spec) {
			upd := cur.Clone()
			upd.Labels, upd.Spec = mergedLabels(cur.Labels, o.Labels), o.Spec
			p.writes = append(p.writes, store.Op{Type: store.OpUpdate, Object: upd, DiscardObject: true})
			p.services[key], p.sums[key] = k, intentSum(upd)
		}
		if slices.Equal(statusVIPs(cur), vips[key]) {
			c.o.VIPs.SetPlatformVIPs(key, nil) // the status holds them
		} else {
			c.o.VIPs.SetPlatformVIPs(key, vips[key])
			p.kick = true
		}
	}
}

func statusVIPs(o *resource.Object) []resource.VIP {
	if st, ok := o.Status.(resource.ServiceStatusOf); ok && st != nil {
		return st.Service().VIPs
	}
	return nil
}

// writer is who the controller is to admission.
var writer = admission.Writer{Source: admission.System, Subject: "the Kubernetes Service controller"}

// computed are the labels the store adds to what it reads: not ours to
// compare or write.
var computed = []string{resource.LabelDisplayName, resource.LabelNamespace, resource.LabelOrigin, resource.LabelZone}

// sameLabels compares the labels a MeshService has with those the
// translation wants, leaving out the ones the store computes (which
// admission also sets on what the translation wants).
func sameLabels(have, want map[string]string) bool {
	h, w := maps.Clone(have), maps.Clone(want)
	for _, k := range computed {
		delete(h, k)
		delete(w, k)
	}
	return maps.Equal(h, w)
}

// mergedLabels are want plus the computed labels the MeshService has.
func mergedLabels(have, want map[string]string) map[string]string {
	out := maps.Clone(want)
	for _, k := range computed {
		if v, ok := have[k]; ok {
			out[k] = v
		}
	}
	return out
}

func specEqual(a, b resource.Spec) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// endpoints returns the endpoints of a Service, with the Pods of a
// headless Service's endpoints (read from the API, cached by UID).
func (c *Controller) endpoints(ctx context.Context, st *state, svc Service, refs []sliceEndpoint) []Endpoint {
	headless := len(svc.ClusterIPs) > 0 && svc.ClusterIPs[0] == "None"
	out := make([]Endpoint, 0, len(refs))
	for _, r := range refs {
		ep := Endpoint{Addresses: r.addresses}
		if r.pod.name != "" {
			if headless {
				ep.Pod = c.pod(ctx, st, r.pod)
			} else {
				ep.Pod = &Pod{Namespace: r.pod.namespace, Name: r.pod.name}
			}
		}
		out = append(out, ep)
	}
	slices.SortFunc(out, func(a, b Endpoint) int {
		an, bn := "", ""
		if a.Pod != nil {
			an = a.Pod.Name
		}
		if b.Pod != nil {
			bn = b.Pod.Name
		}
		return strings.Compare(an, bn)
	})
	return out
}

func (c *Controller) pod(ctx context.Context, st *state, r podRef) *Pod {
	if p, ok := st.pods[r.uid]; ok && r.uid != "" {
		return p
	}
	var raw json.RawMessage
	err := c.o.Client.Get(ctx, kubeapi.Pods, r.namespace, r.name, &raw)
	if err != nil {
		if !errors.Is(err, kubeapi.ErrNotFound) {
			c.o.Log.Warn("reading a Pod of a headless Service", "namespace", r.namespace, "pod", r.name, "err", err)
		}
		return &Pod{Namespace: r.namespace, Name: r.name}
	}
	p, uid, err := decodePod(raw)
	if err != nil {
		return &Pod{Namespace: r.namespace, Name: r.name}
	}
	if uid != "" && (r.uid == "" || r.uid == uid) {
		if len(st.pods) > 100000 {
			clear(st.pods)
		}
		st.pods[uid] = p
	}
	return p
}

// write applies a plan: deletes, then the rest. It returns false when the
// controller must stop.
func (c *Controller) write(ctx context.Context, st *state, q *reconcile.Queue[nsName], p *plan) bool {
	var last int64
	for _, ops := range [][]store.Op{p.deletes, p.writes} {
		if len(ops) == 0 {
			continue
		}
		rs, err := c.o.Store.Apply(ctx, ops...)
		if err != nil {
			if errors.Is(err, store.ErrFenced) {
				c.o.Log.Info("no longer the leader: dropping the MeshService writes", "ops", len(ops))
				return false
			}
			if ctx.Err() != nil {
				return false
			}
			c.o.Log.Warn("writing MeshServices failed; will retry", "ops", len(ops), "err", err)
			for _, op := range ops {
				q.AddAfter(time.Second, p.services[opKey(op)])
			}
			continue
		}
		for i, r := range rs {
			op := ops[i]
			name := strings.ReplaceAll(op.Type.String(), " ", "_")
			switch {
			case r.Err == nil:
				c.writes.WithLabelValues(name, "ok").Inc()
				last = max(last, r.Revision)
				if op.Type == store.OpDelete {
					c.o.VIPs.SetPlatformVIPs(op.Key, nil)
				} else if sum, ok := p.sums[opKey(op)]; ok {
					// Its echo in the cache is then no news (index): the
					// Service is not reconciled a second time for it.
					c.record(st, opKey(op), true, true, p.services[opKey(op)], sum, nil)
				}
			case errors.Is(r.Err, store.ErrConflict), errors.Is(r.Err, store.ErrAlreadyExists), errors.Is(r.Err, store.ErrNotFound):
				// Someone wrote meanwhile: look again once the cache shows it.
				c.writes.WithLabelValues(name, "conflict").Inc()
				q.AddAfter(100*time.Millisecond, p.services[opKey(op)])
			default:
				c.writes.WithLabelValues(name, "error").Inc()
				c.o.Log.Warn("writing a MeshService failed; will retry", "op", op.Type.String(), "key", opKey(op).String(), "err", r.Err)
				q.AddAfter(time.Second, p.services[opKey(op)])
			}
		}
	}
	// The next batch reads the cache: let it show these writes first.
	if last > 0 {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = c.o.Cache.WaitFor(wctx, last)
		cancel()
	}
	return ctx.Err() == nil
}

func opKey(op store.Op) resource.Key {
	if op.Object != nil {
		return op.Object.Key()
	}
	return op.Key
}

// String is for logs.
func (p *plan) String() string {
	return fmt.Sprintf("%d deletes, %d writes", len(p.deletes), len(p.writes))
}
