package xds

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/kubexds"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
)

// Builder keeps one table per active mesh in step with the cache. Every
// instance runs one: proxies connect to any instance, leader or not.
//
// A mesh is active while a proxy of it is connected here (or was, within
// IdleGrace), or an inspection asks for it: its first proxy waits for the
// mesh's table to be built; later ones share it. A mesh no proxy uses
// costs nothing here: no resources, no indexes, no work on its changes.
type Builder struct {
	cache *cache.Cache
	zone  string

	// IdleGrace is how long a mesh's table outlives its last proxy, so
	// that reconnecting proxies find it built.
	IdleGrace time.Duration
	// Built, when set, is called after each batch is applied (tests).
	Built func()
	// IngressesOf, when set, gives the advertised addresses of a zone's
	// ZoneIngresses instead of the cache (tests).
	IngressesOf func(c *cache.Cache, zone string) []netip.AddrPort
	// ExportDefault is spec.export.mode of a MeshService without one
	// (services.exportDefault): whether this zone's ZoneIngress routes it.
	ExportDefault string
	// Names, when set, are the names of the DNS listener (dnsfilter.go):
	// those the DNS server answers. NamesChanged says they changed.
	Names NameSource
	// DNS says which proxies get the DNS listener, and where.
	DNS DNSFilter
	// Slices, when set (env kubernetes), gives the endpoints of the
	// MeshServices made from Kubernetes Services (kube.go).
	Slices ServiceEndpoints

	mu sync.Mutex
	// meshes are the built tables; active the meshes whose changes are
	// followed (built, or being built).
	meshes map[string]*meshTable
	active map[string]bool
	// followAll is set while the ZoneIngress table is active: it routes
	// every mesh's exported services, so every mesh is followed.
	followAll bool

	ready       chan struct{} // closed once the cache is synced
	activations chan activation
	// dnsWanted are requests for a current DNS listener (useDNS), and
	// namesCh says the NameSource changed.
	dnsWanted chan activation
	namesCh   chan struct{}

	states map[string]*meshState // builder goroutine only
	// ingress is the ZoneIngress table's state while it is active, and
	// ingressZones the zone of each ZoneIngress seen (builder goroutine).
	ingress      *ingressState
	ingressZones map[resource.Key]string
}

// meshState is what the builder keeps of an active mesh.
type meshState struct {
	t     *meshTable
	ix    *endpointIndex
	zones *zoneIndex
	ext   *extIndex
	// kube are the MeshServices that take the endpoints of each
	// Kubernetes Service, and kubeOf the Service of each.
	kube   map[kubexds.ServiceName]set[resource.Key]
	kubeOf map[resource.Key]kubexds.ServiceName
}

type activation struct {
	mesh string
	done chan struct{}
}

// NewBuilder returns a builder over c for a control plane of zone.
func NewBuilder(c *cache.Cache, zone string) *Builder {
	return &Builder{cache: c, zone: zone, IdleGrace: time.Minute, ExportDefault: resource.ExportAll, meshes: map[string]*meshTable{}, active: map[string]bool{},
		ready: make(chan struct{}), activations: make(chan activation), dnsWanted: make(chan activation), namesCh: make(chan struct{}, 1),
		states: map[string]*meshState{}, ingressZones: map[resource.Key]string{},
		DNS: DNSFilter{Addr: netip.MustParseAddrPort(DefaultDNSAddr)}}
}

// serviceKinds are the kinds proxies get resources for.
var serviceKinds = []resource.Kind{resource.MeshService, resource.MeshMultiZoneService, resource.MeshExternalService}

func watched(k resource.Kind) bool {
	return k == resource.Dataplane || slices.Contains(serviceKinds, k)
}

// Run follows the cache until ctx ends.
func (b *Builder) Run(ctx context.Context) error {
	q := reconcile.New[resource.Key]()
	defer q.Close()
	cancel := b.cache.Subscribe(func(keys []resource.Key) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, k := range keys {
			switch {
			case k.Kind == resource.ZoneIngress, k.Kind == resource.Mesh && b.followAll:
				q.Add(k)
			case watched(k.Kind) && (b.active[k.Mesh] || b.followAll):
				q.Add(k)
			}
		}
	})
	defer cancel()
	// Services whose EndpointSlices changed, mapped to their MeshServices
	// on this goroutine.
	kq := reconcile.New[kubexds.ServiceName]()
	defer kq.Close()
	if b.Slices != nil {
		defer b.Slices.Subscribe(func(n kubexds.ServiceName) { kq.Add(n) })()
	}
	if !b.cache.WaitSynced(ctx) {
		return nil
	}
	if b.Slices != nil {
		select {
		case <-b.Slices.Synced():
		case <-ctx.Done():
			return nil
		}
	}
	close(b.ready)
	idle := time.NewTicker(max(b.IdleGrace/2, 10*time.Millisecond))
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case a := <-b.activations:
			b.activate(a.mesh)
			close(a.done)
		case a := <-b.dnsWanted:
			b.renderDNS(a.mesh)
			close(a.done)
		case <-b.namesCh:
			for mesh := range b.states {
				b.renderDNS(mesh)
			}
		case <-q.Ready():
			if keys := q.Take(); keys != nil {
				b.apply(keys)
			}
		case <-kq.Ready():
			if keys := b.kubeKeys(kq.Take()); keys != nil {
				b.apply(keys)
			}
		case now := <-idle.C:
			b.deactivateIdle(now)
		}
	}
}

// Ready is closed once the builder follows the cache.
func (b *Builder) Ready() <-chan struct{} { return b.ready }

// acquire returns the built table of mesh, building it first when no
// proxy uses it yet; release it when done.
func (b *Builder) acquire(ctx context.Context, mesh string) (*meshTable, error) {
	for {
		b.mu.Lock()
		if t := b.meshes[mesh]; t != nil {
			t.refs++
			b.mu.Unlock()
			return t, nil
		}
		b.mu.Unlock()
		a := activation{mesh: mesh, done: make(chan struct{})}
		select {
		case b.activations <- a:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// release ends a use of t that acquire began.
func (b *Builder) release(t *meshTable) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.refs--; t.refs == 0 {
		t.idleSince = time.Now()
	}
}

// activate builds the table of mesh from the cache (builder goroutine).
// Changes to the mesh are followed from before the scan, so none is
// missed; those the scan already saw are applied again, to no effect.
func (b *Builder) activate(mesh string) {
	if b.states[mesh] != nil {
		return
	}
	if mesh == ingressMesh {
		b.activateIngress()
		b.publish(mesh)
		return
	}
	b.mu.Lock()
	b.active[mesh] = true
	b.mu.Unlock()
	st := &meshState{t: newMeshTable(), ix: newEndpointIndex(), zones: newZoneIndex(), ext: newExtIndex(),
		kube: map[kubexds.ServiceName]set[resource.Key]{}, kubeOf: map[resource.Key]kubexds.ServiceName{}}
	b.states[mesh] = st
	b.cache.Scan(cache.Query{Kind: resource.Dataplane, Mesh: mesh, Unordered: true}, func(o *resource.Object) {
		st.ix.dataplaneChanged(o.Key(), o)
	})
	changed := map[string]bool{}
	for _, kind := range serviceKinds { // MeshServices before the multi-zone services that take their endpoints
		var keys []resource.Key
		b.cache.Scan(cache.Query{Kind: kind, Mesh: mesh, Unordered: true}, func(o *resource.Object) { keys = append(keys, o.Key()) })
		for _, k := range keys {
			b.render(k, changed)
		}
	}
	b.renderShared(st, mesh, changed)
	b.publish(mesh)
	if changed[ingressMesh] {
		b.wake(ingressMesh)
	}
}

// publish makes the built table of mesh available to acquire.
func (b *Builder) publish(mesh string) {
	t := b.states[mesh].t
	b.mu.Lock()
	b.meshes[mesh] = t
	t.idleSince = time.Now()
	b.mu.Unlock()
}

// wake tells the streams of mesh's table that it changed.
func (b *Builder) wake(mesh string) {
	t := b.states[mesh].t
	t.mu.RLock()
	t.wake()
	t.mu.RUnlock()
}

// deactivateIdle drops the tables no proxy has used for IdleGrace.
func (b *Builder) deactivateIdle(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.meshes[ingressMesh]; t != nil {
		if t.refs > 0 || now.Sub(t.idleSince) < b.IdleGrace {
			return // a ZoneIngress proxy uses every mesh
		}
		delete(b.meshes, ingressMesh)
		delete(b.active, ingressMesh)
		delete(b.states, ingressMesh)
		b.ingress, b.followAll = nil, false
		for _, mt := range b.meshes {
			mt.idleSince = now // each mesh's own grace starts now
		}
		return
	}
	for mesh, t := range b.meshes {
		if t.refs == 0 && now.Sub(t.idleSince) >= b.IdleGrace {
			delete(b.meshes, mesh)
			delete(b.active, mesh)
			delete(b.states, mesh)
		}
	}
}

// apply re-renders what keys touch and wakes the streams of the meshes
// that changed.
func (b *Builder) apply(keys []resource.Key) {
	services := map[resource.Key]bool{}
	proxies := map[resource.Key]bool{}
	ingressChanged := false
	for _, k := range keys {
		switch k.Kind {
		case resource.ZoneIngress:
			zone := b.ingressChanged(k)
			ingressChanged = ingressChanged || zone == b.zone || zone == ""
			for mesh, st := range b.states {
				if mesh == ingressMesh {
					continue
				}
				for s := range st.zones.byZone[zone] {
					services[s] = true
				}
				if zone == "" { // a deletion of an ingress never seen: every remote service
					for _, ks := range st.zones.byZone {
						for s := range ks {
							services[s] = true
						}
					}
				}
			}
			continue
		case resource.Mesh:
			if b.followAll && b.states[k.Name] == nil {
				if _, ok := b.cache.Peek(k); ok {
					b.activate(k.Name)
				}
			}
			continue
		}
		if b.followAll && b.states[k.Mesh] == nil {
			b.activate(k.Mesh)
		}
		st := b.states[k.Mesh]
		if st == nil {
			continue // the mesh went idle since the key was queued
		}
		if k.Kind != resource.Dataplane {
			services[k] = true
			continue
		}
		proxies[k] = true
		dp, _ := b.cache.Peek(k)
		for _, s := range st.ix.dataplaneChanged(k, dp) {
			services[s] = true
		}
	}
	changed := map[string]bool{}
	// MeshServices first: multi-zone services take their endpoints.
	multi := set[resource.Key]{}
	for k := range services {
		if k.Kind == resource.MeshMultiZoneService {
			multi.add(k)
			continue
		}
		for mz := range b.render(k, changed) {
			multi.add(mz)
		}
	}
	for k := range multi {
		b.render(k, changed)
	}
	for k := range services {
		b.renderShared(b.states[k.Mesh], k.Mesh, changed)
	}
	b.renderIngressListeners(ingressChanged, changed)
	for mesh := range changed {
		b.wake(mesh)
	}
	for k := range proxies {
		if changed[k.Mesh] || b.states[k.Mesh] == nil {
			continue // its streams were woken with the mesh
		}
		t := b.states[k.Mesh].t
		t.mu.RLock()
		for s := range t.streams {
			if s.proxy.Name == k.Name {
				s.poke()
			}
		}
		t.mu.RUnlock()
	}
	if b.Built != nil {
		b.Built()
	}
}

// render re-renders the service k into its mesh's table, marking the
// mesh changed when a proxy sees a difference. It returns the multi-zone
// services that take endpoints from k.
func (b *Builder) render(k resource.Key, changed map[string]bool) set[resource.Key] {
	st := b.states[k.Mesh]
	var dependents set[resource.Key]
	obj, ok := b.cache.Peek(k)
	var svc *Service
	if ok {
		if k.Kind == resource.MeshService {
			dependents = st.zones.feeds[b.memberOf(obj)]
		}
		svc = b.service(st, obj)
	} else {
		st.ix.serviceGone(k)
		st.zones.forget(k)
		st.ext.forget(k)
		st.trackKube(k, kubexds.ServiceName{})
	}
	t := st.t
	var rs []Resource
	var labels map[string]string
	if svc != nil {
		rs, labels = Render(svc), svc.Labels
	}
	t.mu.Lock()
	if t.put(k, labels, rs) {
		changed[k.Mesh] = true
	}
	t.mu.Unlock()
	b.renderIngress(k, obj, svc, changed)
	return dependents
}

// service reads what proxies need of a service object.
func (b *Builder) service(st *meshState, o *resource.Object) *Service {
	s := &Service{Key: o.Key(), Labels: o.Labels}
	if st, ok := o.Status.(interface {
		Service() *resource.ServiceStatus
	}); ok && st != nil {
		ss := st.Service()
		for _, v := range ss.VIPs {
			if a, err := netip.ParseAddr(v.IP); err == nil && v.Hostname == "" {
				s.VIPs = append(s.VIPs, a)
			}
		}
		for _, a := range ss.Addresses {
			if a.Status == resource.AddressAvailable {
				s.Hostnames = append(s.Hostnames, a.Hostname)
			}
		}
	}
	switch spec := o.Spec.(type) {
	case *resource.MeshServiceSpec:
		for _, p := range spec.Ports {
			s.Ports = append(s.Ports, Port{Port: p.Port, Name: p.Name, Protocol: p.AppProtocol})
		}
		k := o.Key()
		svc, pod, fromService := b.kubeService(o, spec)
		switch {
		case b.local(o) && fromService:
			st.ix.serviceGone(k)
			st.trackKube(k, svc)
			s.Endpoints = b.sliceEndpoints(svc, pod, spec.Ports)
			s.NoEndpoints = "no ready or terminating-and-serving endpoint of the EndpointSlices of Service " + svc.String() + " serves this port"
			st.zones.local[k] = s.Endpoints
			st.zones.useZones(k, nil)
		case b.local(o):
			st.trackKube(k, kubexds.ServiceName{})
			s.Endpoints = st.ix.endpoints(b.cache, o, spec, b.zone)
			s.NoEndpoints = "no Ready inbound of a Dataplane the service selects serves this port"
			st.zones.local[k] = s.Endpoints
			st.zones.useZones(k, nil)
		default:
			st.ix.serviceGone(k)
			st.trackKube(k, kubexds.ServiceName{})
			delete(st.zones.local, k)
			m := b.memberOf(o)
			s.Endpoints = map[int][]Endpoint{}
			for _, p := range s.Ports {
				s.Endpoints[p.Port] = b.remoteEndpoints(m, p.Port, 0)
			}
			st.zones.useZones(k, set[string]{m.zone: {}})
			s.NoEndpoints = "the service is in zone " + m.zone + ", and no ZoneIngress of that zone with an IP address is known (its advertisedAddress, else its address; a DNS name is no EDS endpoint)"
		}
	case *resource.MeshMultiZoneServiceSpec:
		b.multiZone(st, o, s)
	case *resource.MeshExternalServiceSpec:
		b.externalService(st, o, spec, s)
	}
	return s
}

// local reports whether o is a service of this zone, whose endpoints are
// its Dataplanes here (not one synced from another zone).
func (b *Builder) local(o *resource.Object) bool {
	if o.Labels[resource.LabelOrigin] == resource.OriginGlobal {
		return false
	}
	z, ok := o.Labels[resource.LabelZone]
	return !ok || z == b.zone
}
