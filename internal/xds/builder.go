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

	ix *endpointIndex // builder goroutine only
}

// NewBuilder returns a builder over c for a control plane of zone.
func NewBuilder(c *cache.Cache, zone string) *Builder {
	return &Builder{cache: c, zone: zone, meshes: map[string]*meshTable{}, ready: make(chan struct{}), ix: newEndpointIndex()}
}

// serviceKinds are the kinds proxies get resources for.
var serviceKinds = []resource.Kind{resource.MeshService}

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
	for k := range services {
		obj, ok := b.cache.Peek(k)
		var svc *Service
		if ok {
			svc = b.service(obj)
		} else {
			b.ix.serviceGone(k)
		}
		t := b.table(k.Mesh, svc != nil)
		if t == nil {
			continue
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
		if b.local(o) {
			s.Endpoints = b.ix.endpoints(b.cache, o, spec, b.zone)
			s.NoEndpoints = "no Ready inbound of a Dataplane the service selects serves this port"
		} else {
			b.ix.serviceGone(o.Key())
			s.NoEndpoints = "the service is in zone " + o.Labels[resource.LabelZone] + ", and proxies here reach other zones' services through ZoneIngress, which this control plane does not serve yet"
		}
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
