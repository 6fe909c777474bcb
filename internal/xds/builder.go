package xds

import (
	"context"
	"net/netip"
	"slices"
	"sync"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
)

// Builder keeps one table per mesh in step with the cache. Every
// instance runs one: proxies connect to any instance, leader or not.
type Builder struct {
	cache *cache.Cache
	zone  string

	mu     sync.RWMutex
	meshes map[string]*meshTable

	// ready is closed once the first full build is done.
	ready chan struct{}
	// Built, when set, is called after each batch is applied (tests).
	Built func()

	// IngressesOf, when set, gives the advertised addresses of a zone's
	// ZoneIngresses instead of the cache (tests).
	IngressesOf func(c *cache.Cache, zone string) []netip.AddrPort

	ix    *endpointIndex // builder goroutine only
	zones *zoneIndex     // builder goroutine only
}

// NewBuilder returns a builder over c for a control plane of zone.
func NewBuilder(c *cache.Cache, zone string) *Builder {
	return &Builder{cache: c, zone: zone, meshes: map[string]*meshTable{}, ready: make(chan struct{}), ix: newEndpointIndex(), zones: newZoneIndex()}
}

// serviceKinds are the kinds proxies get resources for.
var serviceKinds = []resource.Kind{resource.MeshService, resource.MeshMultiZoneService}

func watched(k resource.Kind) bool {
	return k == resource.Dataplane || slices.Contains(serviceKinds, k)
}

// Run follows the cache until ctx ends.
func (b *Builder) Run(ctx context.Context) error {
	q := reconcile.New[resource.Key]()
	defer q.Close()
	cancel := b.cache.Subscribe(func(keys []resource.Key) {
		for _, k := range keys {
			if watched(k.Kind) {
				q.Add(k)
			}
		}
	})
	defer cancel()
	if !b.cache.WaitSynced(ctx) {
		return nil
	}
	var all []resource.Key
	b.cache.Scan(cache.Query{Kind: resource.Dataplane, Unordered: true}, func(o *resource.Object) { all = append(all, o.Key()) })
	for _, k := range serviceKinds {
		b.cache.Scan(cache.Query{Kind: k, Unordered: true}, func(o *resource.Object) { all = append(all, o.Key()) })
	}
	b.apply(all)
	close(b.ready)
	for {
		keys := q.Next(ctx)
		if keys == nil {
			return nil
		}
		b.apply(keys)
	}
}

// Ready is closed once the builder has built every mesh's table.
func (b *Builder) Ready() <-chan struct{} { return b.ready }

// apply re-renders what keys touch and wakes the streams of the meshes
// that changed.
func (b *Builder) apply(keys []resource.Key) {
	services := map[resource.Key]bool{}
	proxies := map[resource.Key]bool{}
	for _, k := range keys {
		if k.Kind != resource.Dataplane {
			services[k] = true
			continue
		}
		proxies[k] = true
		dp, _ := b.cache.Peek(k)
		for _, s := range b.ix.dataplaneChanged(k, dp) {
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
	for mesh := range changed {
		t := b.table(mesh, false)
		t.mu.RLock()
		t.wake()
		t.mu.RUnlock()
	}
	for k := range proxies {
		if changed[k.Mesh] {
			continue // its streams were woken with the mesh
		}
		if t := b.table(k.Mesh, false); t != nil {
			t.mu.RLock()
			for s := range t.streams {
				if s.proxy.Name == k.Name {
					s.poke()
				}
			}
			t.mu.RUnlock()
		}
	}
	if b.Built != nil {
		b.Built()
	}
}

// render re-renders the service k into its mesh's table, marking the
// mesh changed when a proxy sees a difference. It returns the multi-zone
// services that take endpoints from k.
func (b *Builder) render(k resource.Key, changed map[string]bool) set[resource.Key] {
	var dependents set[resource.Key]
	obj, ok := b.cache.Peek(k)
	var svc *Service
	if ok {
		if k.Kind == resource.MeshService {
			dependents = b.zones.feeds[b.memberOf(obj)]
		}
		svc = b.service(obj)
	} else {
		b.ix.serviceGone(k)
		b.zones.forget(k)
	}
	t := b.table(k.Mesh, svc != nil)
	if t == nil {
		return dependents
	}
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
	return dependents
}

// table returns the table of mesh, made when create is set.
func (b *Builder) table(mesh string, create bool) *meshTable {
	b.mu.RLock()
	t := b.meshes[mesh]
	b.mu.RUnlock()
	if t != nil || !create {
		return t
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t = b.meshes[mesh]; t == nil {
		t = newMeshTable()
		b.meshes[mesh] = t
	}
	return t
}

// service reads what proxies need of a service object.
func (b *Builder) service(o *resource.Object) *Service {
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
		if b.local(o) {
			s.Endpoints = b.ix.endpoints(b.cache, o, spec, b.zone)
			s.NoEndpoints = "no Ready inbound of a Dataplane the service selects serves this port"
			b.zones.local[k] = s.Endpoints
			b.zones.useZones(k, nil)
		} else {
			b.ix.serviceGone(k)
			delete(b.zones.local, k)
			m := b.memberOf(o)
			s.Endpoints = map[int][]Endpoint{}
			for _, p := range s.Ports {
				s.Endpoints[p.Port] = b.remoteEndpoints(m, p.Port, 0)
			}
			b.zones.useZones(k, set[string]{m.zone: {}})
			s.NoEndpoints = "the service is in zone " + m.zone + ", and no ZoneIngress of that zone is known"
		}
	case *resource.MeshMultiZoneServiceSpec:
		b.multiZone(o, s)
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
