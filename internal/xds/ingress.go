package xds

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// ingressMesh is the key of the ZoneIngress proxies' table among the
// mesh tables: no mesh has an empty name. A ZoneIngress serves every mesh,
// so while its table is active every mesh is.
const ingressMesh = ""

// ingressRoute is one SNI a ZoneIngress routes: an exported local
// MeshService's port, and the cluster (in the ingress's table) of its
// local endpoints.
type ingressRoute struct {
	sni, cluster string
}

// ingressState is what the builder keeps for the ZoneIngress proxies of
// this zone: the routes of each exported local MeshService, and whether
// the listeners must be rendered again.
type ingressState struct {
	routes map[resource.Key][]ingressRoute
	dirty  bool
}

// IngressClusterName is the name, in a ZoneIngress proxy's config, of
// the cluster of port of the MeshService k: every mesh's services meet
// there, so the mesh prefixes the name a proxy of the mesh knows.
func IngressClusterName(k resource.Key, port int) string {
	return k.Mesh + ":" + ClusterName(k, port)
}

// IngressListenerName is the name of a ZoneIngress proxy's listener.
func IngressListenerName(name string) string { return "ingress:" + name }

// Knows reports whether p names a proxy of this control plane: a
// Dataplane that exists, or a ZoneIngress of this zone (not one synced
// from another).
func (b *Builder) Knows(p Proxy) bool {
	o, ok := b.cache.Peek(p.Key())
	if !ok || !p.Ingress() {
		return ok
	}
	return o.Labels[resource.LabelZone] == b.zone && o.Labels[resource.LabelOrigin] != resource.OriginGlobal
}

// exported reports whether the MeshService o leaves its zone (seed 002:
// spec.export.mode, else services.exportDefault).
func (b *Builder) exported(o *resource.Object) bool {
	mode := b.ExportDefault
	if e := o.Spec.(*resource.MeshServiceSpec).Export; e != nil && e.Mode != "" {
		mode = e.Mode
	}
	return mode == resource.ExportAll
}

// renderIngress puts the ingress resources of the MeshService k (just
// rendered into its mesh: svc nil when gone or not local and exported)
// into the ingress table.
func (b *Builder) renderIngress(k resource.Key, o *resource.Object, svc *Service, changed map[string]bool) {
	ing := b.ingress
	if ing == nil || k.Kind != resource.MeshService {
		return
	}
	var rs []Resource
	var routes []ingressRoute
	if o != nil && svc != nil && b.local(o) && b.exported(o) {
		m := b.memberOf(o)
		for _, p := range svc.Ports {
			name := IngressClusterName(k, p.Port)
			rs = append(rs,
				Resource{Type: ClusterType, Name: name, Msg: plainCluster(name, p.Protocol), Port: p.Port},
				Resource{Type: EndpointType, Name: name, Msg: loadAssignment(name, svc.Endpoints[p.Port]), Port: p.Port})
			routes = append(routes, ingressRoute{sni: SNI(m.mesh, m.zone, m.name, m.namespace, p.Port), cluster: name})
		}
	}
	if !slices.Equal(ing.routes[k], routes) {
		ing.dirty = true
		if routes == nil {
			delete(ing.routes, k)
		} else {
			ing.routes[k] = routes
		}
	}
	t := b.states[ingressMesh].t
	t.mu.Lock()
	if t.put(k, nil, rs) {
		changed[ingressMesh] = true
	}
	t.mu.Unlock()
}

// renderIngressListeners renders the listener of every ZoneIngress of this
// zone when the routes changed (or force): one filter chain per route,
// matched by SNI, passing the connection through to the local cluster.
func (b *Builder) renderIngressListeners(force bool, changed map[string]bool) {
	ing := b.ingress
	if ing == nil || !(ing.dirty || force) {
		return
	}
	ing.dirty = false
	var routes []ingressRoute
	for _, rs := range ing.routes {
		routes = append(routes, rs...)
	}
	// Two services with one SNI (hashed names that collide): the route to
	// the first cluster by name wins, the same on every instance.
	slices.SortFunc(routes, func(a, b ingressRoute) int {
		return cmp.Or(strings.Compare(a.sni, b.sni), strings.Compare(a.cluster, b.cluster))
	})
	routes = slices.CompactFunc(routes, func(a, b ingressRoute) bool { return a.sni == b.sni })
	t := b.states[ingressMesh].t
	seen := set[resource.Key]{}
	b.cache.Scan(cache.Query{Kind: resource.ZoneIngress, Labels: map[string]string{resource.LabelZone: b.zone}, Unordered: true}, func(o *resource.Object) {
		k := o.Key()
		seen.add(k)
		rs := []Resource{{Type: ListenerType, Name: IngressListenerName(o.Name),
			Note: "ZoneIngress " + o.Name + " has no listener: no MeshService of this zone is exported (spec.export.mode, else services.exportDefault)"}}
		if len(routes) > 0 {
			rs = []Resource{{Type: ListenerType, Name: IngressListenerName(o.Name), Msg: ingressListener(o, routes)}}
		}
		t.mu.Lock()
		if t.put(k, nil, rs) {
			changed[ingressMesh] = true
		}
		t.mu.Unlock()
	})
	t.mu.Lock()
	for k := range t.owners {
		if k.Kind == resource.ZoneIngress && !has(seen, k) {
			if t.put(k, nil, nil) {
				changed[ingressMesh] = true
			}
		}
	}
	t.mu.Unlock()
}

func has[K comparable](s set[K], k K) bool { _, ok := s[k]; return ok }

// ingressListener is the listener of the ZoneIngress o: bound on its
// address (every address when that is a DNS name) and port, reading the
// SNI of each connection (tls_inspector) without terminating TLS.
func ingressListener(o *resource.Object, routes []ingressRoute) *listenerv3.Listener {
	n := o.Spec.(*resource.ZoneIngressSpec).Networking
	addr, err := netip.ParseAddr(n.Address)
	if err != nil {
		addr = netip.IPv4Unspecified()
	}
	l := &listenerv3.Listener{
		Name:    IngressListenerName(o.Name),
		Address: socketAddress(addr, uint16(n.Port)),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       "envoy.filters.listener.tls_inspector",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspectorv3.TlsInspector{})},
		}},
	}
	for _, r := range routes {
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{
			Name:             r.sni,
			FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{r.sni}},
			Filters: []*listenerv3.Filter{{
				Name: "envoy.filters.network.tcp_proxy",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(&tcpv3.TcpProxy{
					StatPrefix:       r.cluster,
					ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: r.cluster},
				})},
			}},
		})
	}
	return l
}

// activateIngress builds the ingress table: every mesh active, every
// exported local MeshService's routes (builder goroutine).
func (b *Builder) activateIngress() {
	b.mu.Lock()
	b.active[ingressMesh] = true
	b.followAll = true
	b.mu.Unlock()
	b.states[ingressMesh] = &meshState{t: newMeshTable()}
	b.ingress = &ingressState{routes: map[resource.Key][]ingressRoute{}}
	meshes := set[string]{}
	b.cache.Scan(cache.Query{Kind: resource.Mesh, Unordered: true}, func(o *resource.Object) { meshes.add(o.Name) })
	changed := map[string]bool{}
	for mesh := range meshes {
		if b.states[mesh] == nil {
			b.activate(mesh) // renders into the ingress table too
			continue
		}
		var keys []resource.Key
		b.cache.Scan(cache.Query{Kind: resource.MeshService, Mesh: mesh, Unordered: true}, func(o *resource.Object) { keys = append(keys, o.Key()) })
		for _, k := range keys {
			b.render(k, changed)
		}
	}
	b.renderIngressListeners(true, changed)
}
