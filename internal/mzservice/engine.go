package mzservice

import (
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
)

// This file holds the pure, incremental engine: what a zone writes in the
// status of each MeshMultiZoneService. It imports only resource: no cache,
// store, goroutine or clock. The caller feeds it MeshServices and
// MeshMultiZoneServices as they change, takes the keys whose status may
// have changed (TakeDirty) and asks for each one's status (Status). An
// Engine is not safe for concurrent use.
//
// Rules (seed 002, and where we differ from Kuma, kuma-facts section 13):
//   - Only MeshServices of the MeshMultiZoneService's own mesh match (Kuma
//     matches across meshes).
//   - A service matches when it has every label of
//     spec.selector.meshService.matchLabels with an equal value; a missing
//     label never matches, even a wanted empty value (Kuma reads it as "").
//   - An empty matchLabels matches every MeshService of the mesh, as every
//     other label selector of meshnames does; a missing
//     spec.selector.meshService matches none. Admission refuses both, so
//     only a MeshMultiZoneService stored under other rules has one.
//   - Declared spec.ports are offered as they are. Without them, the ports
//     offered are those every matched service has with the same number and
//     protocol (seed 002: "we take only common ports"), named when every
//     service gives the port the same name; PortsConsistent (False,
//     PortsDiffer) names each port left out and the services that lack it.
//
// Mechanism: each MeshMultiZoneService is indexed, per mesh, under one
// label pair of its selector (its anchor), or in the mesh's list of empty
// selectors. A service can only be matched by the selectors anchored on one
// of its own labels, so a MeshService change looks up its old and new
// labels in that index and re-checks only those candidates: the cost of
// one change depends on the selectors that share a label with the service,
// not on the number of services. A MeshMultiZoneService whose selector
// changes is matched against every service of its mesh, once per batch
// however many changed (see settle).
//
// Memory: the engine keeps, per MeshService, its labels and ports packed
// into one string (labels.go), shared between services where equal, in a
// map keyed by name; no object, map of labels or slice. Each
// MeshMultiZoneService keeps the names it matches.

// Engine computes the status of MeshMultiZoneServices. The zero value is
// not usable; call NewEngine.
type Engine struct {
	// zone is the zone of MeshServices without a kuma.io/zone label.
	zone   string
	meshes map[string]*mesh
	// dirty lists the MeshMultiZoneServices whose status may have changed
	// since the last TakeDirty, each once (mzs.dirty).
	dirty []*mzs
	// pending counts the MeshMultiZoneServices of every mesh awaiting
	// their match against all services (mesh.pending).
	pending int
	// stamp marks the candidates of one service change (mzs.stamp).
	stamp uint64
	// buf and old are scratch for candidate lists, pack for packing.
	buf, old []*mzs
	pack     []byte
	// services shares equal packed services.
	services dedup
}

// mesh holds one mesh's services and MeshMultiZoneServices.
type mesh struct {
	// svcs holds each service's labels and ports, packed (labels.go).
	svcs map[string]string
	mzs  map[string]*mzs
	// byAnchor holds every MeshMultiZoneService with a non-empty selector
	// under its anchor pair.
	byAnchor map[pair][]*mzs
	// all holds those with an empty selector, which match every service.
	all []*mzs
	// pending holds those whose selector changed since the last settle:
	// their matches are computed from every service of the mesh then.
	pending []*mzs
}

// mzs is what the engine keeps of a MeshMultiZoneService.
type mzs struct {
	key resource.Key
	sel selector
	// anchor indexes sel.pairs: the pair it is indexed under.
	anchor   int
	declared []resource.Port
	// matched holds the names of the services the selector matches; it is
	// rebuilt by settle while pending.
	matched map[string]struct{}
	pending bool
	dirty   bool
	deleted bool
	// stamp is Engine.stamp when the service being changed matched it
	// before the change, and Engine.stamp+1 once known to match it still.
	stamp uint64
}

// selector is spec.selector.meshService: set is false when it is missing;
// pairs are sorted by key.
type selector struct {
	set   bool
	pairs []pair
}

func (s selector) equal(o selector) bool { return s.set == o.set && slices.Equal(s.pairs, o.pairs) }

// matches reports whether the selector matches the service name with the
// packed labels.
func (s selector) matches(packed, name string) bool { return s.set && contains(packed, name, s.pairs) }

// broadLabels are set by the control plane on nearly every service, so a
// selector pair on one of them is a poor anchor: every service change of
// the zone or mesh would look at its MeshMultiZoneService.
var broadLabels = []string{resource.LabelOrigin, resource.LabelZone, resource.LabelMesh, resource.LabelEnv, resource.LabelManagedBy}

// NewEngine returns an empty engine for a control plane in zone, the zone of
// MeshServices without a kuma.io/zone label.
func NewEngine(zone string) *Engine {
	return &Engine{zone: zone, meshes: map[string]*mesh{}}
}

func (c *Engine) mesh(name string) *mesh {
	m := c.meshes[name]
	if m == nil {
		m = &mesh{svcs: map[string]string{}, mzs: map[string]*mzs{}, byAnchor: map[pair][]*mzs{}}
		c.meshes[name] = m
	}
	return m
}

// dropEmpty forgets a mesh that holds nothing any more.
func (c *Engine) dropEmpty(name string, m *mesh) {
	if len(m.svcs) == 0 && len(m.mzs) == 0 {
		delete(c.meshes, name)
	}
}

func (c *Engine) markDirty(a *mzs) {
	if !a.dirty {
		a.dirty = true
		c.dirty = append(c.dirty, a)
	}
}

// SetService adds or replaces the MeshService obj. The engine keeps none of
// obj's maps or slices. Setting a service whose labels and ports did not
// change does nothing.
func (c *Engine) SetService(obj *resource.Object) {
	var ports []resource.Port
	if spec, ok := obj.Spec.(*resource.MeshServiceSpec); ok && spec != nil {
		ports = spec.Ports
	}
	name := obj.Name
	var s string
	s, c.pack = packService(&c.services, c.pack, name, obj.Labels, ports)
	m := c.mesh(obj.Mesh)
	old, had := m.svcs[name]
	if had && old == s {
		return
	}
	m.svcs[name] = s
	if len(m.mzs) == 0 {
		return
	}
	// Candidates that matched the service before the change get stamp
	// was; those that still match get kept. Pending ones are skipped:
	// settle matches them against every service anyway.
	c.stamp += 2
	was, kept := c.stamp, c.stamp+1
	c.old = c.old[:0]
	if had {
		oldLabels, _ := splitService(old)
		for _, a := range m.candidates(c.buf[:0], name, oldLabels) {
			if _, ok := a.matched[name]; ok && !a.pending {
				a.stamp = was
				c.old = append(c.old, a)
			}
		}
	}
	labels, _ := splitService(s)
	c.buf = m.candidates(c.buf[:0], name, labels)
	for _, a := range c.buf {
		switch {
		case a.pending || !a.sel.matches(labels, name):
		case a.stamp == was:
			a.stamp = kept
			if !c.sameMember(name, old, s) {
				c.markDirty(a)
			}
		default:
			if a.matched == nil {
				a.matched = map[string]struct{}{}
			}
			a.matched[name] = struct{}{}
			c.markDirty(a)
		}
	}
	for _, a := range c.old {
		if a.stamp == was {
			delete(a.matched, name)
			c.markDirty(a)
		}
	}
	clear(c.buf)
	clear(c.old)
}

// sameMember reports whether a MeshService changing from a to b leaves
// what a status shows of it (display name, namespace, zone, ports) as it
// was.
func (c *Engine) sameMember(name string, a, b string) bool {
	la, pa := splitService(a)
	lb, pb := splitService(b)
	if pa != pb {
		return false
	}
	for _, k := range []string{resource.LabelDisplayName, resource.LabelNamespace, resource.LabelZone} {
		va, oka := label(la, name, k)
		vb, okb := label(lb, name, k)
		if va != vb || oka != okb {
			return false
		}
	}
	return true
}

// DeleteService removes the MeshService k. Unknown keys are ignored.
func (c *Engine) DeleteService(k resource.Key) {
	m := c.meshes[k.Mesh]
	if m == nil {
		return
	}
	old, had := m.svcs[k.Name]
	if !had {
		return
	}
	delete(m.svcs, k.Name)
	oldLabels, _ := splitService(old)
	c.buf = m.candidates(c.buf[:0], k.Name, oldLabels)
	for _, a := range c.buf {
		if _, ok := a.matched[k.Name]; ok {
			delete(a.matched, k.Name)
			c.markDirty(a)
		}
	}
	clear(c.buf)
	c.dropEmpty(k.Mesh, m)
}

// candidates appends to dst the MeshMultiZoneServices of m that could
// match a service named name with the packed labels: those anchored on one
// of its labels and those with an empty selector. Each is appended at most
// once, since each has one anchor.
func (m *mesh) candidates(dst []*mzs, name, packed string) []*mzs {
	dst = append(dst, m.all...)
	if len(m.byAnchor) == 0 {
		return dst
	}
	for _, k := range nameKeys {
		if v, ok := named(packed).Get(name, k); ok {
			dst = append(dst, m.byAnchor[pair{k, v}]...)
		}
	}
	for rest := packed[2:]; rest != ""; {
		var k, v string
		k, v, rest = nextLabel(rest)
		dst = append(dst, m.byAnchor[pair{k, v}]...)
	}
	return dst
}

// SetMultiZoneService adds or replaces the MeshMultiZoneService obj. The
// engine keeps none of obj's maps or slices. A new selector is matched
// against the services of the mesh at the next TakeDirty or Status.
func (c *Engine) SetMultiZoneService(obj *resource.Object) {
	spec, _ := obj.Spec.(*resource.MeshMultiZoneServiceSpec)
	sel, declared := selectorOf(spec), declaredPorts(spec)
	m := c.mesh(obj.Mesh)
	a := m.mzs[obj.Name]
	switch {
	case a == nil:
		a = &mzs{key: resource.Key{Kind: resource.MeshMultiZoneService, Mesh: obj.Mesh, Name: obj.Name}}
		m.mzs[obj.Name] = a
	case a.sel.equal(sel):
		if !slices.Equal(a.declared, declared) {
			a.declared = declared
			c.markDirty(a)
		}
		return
	default:
		m.unindex(a)
		if a.pending {
			m.pending = slices.DeleteFunc(m.pending, func(x *mzs) bool { return x == a })
			c.pending--
		}
	}
	a.sel, a.declared, a.matched, a.pending = sel, declared, nil, false
	m.index(a)
	if sel.set {
		a.pending = true
		m.pending = append(m.pending, a)
		c.pending++
	}
	c.markDirty(a)
}

// DeleteMultiZoneService removes the MeshMultiZoneService k. Unknown keys
// are ignored.
func (c *Engine) DeleteMultiZoneService(k resource.Key) {
	m := c.meshes[k.Mesh]
	if m == nil {
		return
	}
	a := m.mzs[k.Name]
	if a == nil {
		return
	}
	m.unindex(a)
	if a.pending {
		m.pending = slices.DeleteFunc(m.pending, func(x *mzs) bool { return x == a })
		c.pending--
	}
	delete(m.mzs, k.Name)
	a.deleted, a.matched = true, nil
	c.dropEmpty(k.Mesh, m)
}

func (m *mesh) index(a *mzs) {
	switch {
	case !a.sel.set:
		// Matches nothing: no service needs to find it.
	case len(a.sel.pairs) == 0:
		m.all = append(m.all, a)
	default:
		a.anchor = anchorOf(a.sel.pairs)
		p := a.sel.pairs[a.anchor]
		m.byAnchor[p] = append(m.byAnchor[p], a)
	}
}

func (m *mesh) unindex(a *mzs) {
	switch {
	case !a.sel.set:
	case len(a.sel.pairs) == 0:
		m.all = slices.DeleteFunc(m.all, func(x *mzs) bool { return x == a })
	default:
		p := a.sel.pairs[a.anchor]
		l := slices.DeleteFunc(m.byAnchor[p], func(x *mzs) bool { return x == a })
		if len(l) == 0 {
			delete(m.byAnchor, p)
		} else {
			m.byAnchor[p] = l
		}
	}
}

// anchorOf picks the pair of a selector to index it under: the first whose
// key is not one of broadLabels, else the first.
func anchorOf(pairs []pair) int {
	for i, p := range pairs {
		if !slices.Contains(broadLabels, p.k) {
			return i
		}
	}
	return 0
}

// settle matches every pending MeshMultiZoneService against the services
// of its mesh: one pass over the mesh's services for all of them, so that
// loading 1,000 MeshMultiZoneServices over 100,000 services costs one
// pass, not 1,000. Each service is asked only for the label keys the
// pending selectors are anchored on (usually one or two), and each value
// it has is looked up among those anchors.
func (c *Engine) settle() {
	if c.pending == 0 {
		return
	}
	for _, m := range c.meshes {
		if len(m.pending) == 0 {
			continue
		}
		var keys []string
		var all []*mzs
		anchors := map[pair][]*mzs{}
		for _, a := range m.pending {
			a.matched = map[string]struct{}{}
			if len(a.sel.pairs) == 0 {
				all = append(all, a)
				continue
			}
			p := a.sel.pairs[a.anchor]
			if !slices.Contains(keys, p.k) {
				keys = append(keys, p.k)
			}
			anchors[p] = append(anchors[p], a)
		}
		for name, s := range m.svcs {
			labels, _ := splitService(s)
			for _, a := range all {
				a.matched[name] = struct{}{}
			}
			for _, k := range keys {
				v, ok := label(labels, name, k)
				if !ok {
					continue
				}
				for _, a := range anchors[pair{k, v}] {
					if a.sel.matches(labels, name) {
						a.matched[name] = struct{}{}
					}
				}
			}
		}
		for _, a := range m.pending {
			a.pending = false
		}
		m.pending = nil
	}
	c.pending = 0
}

// TakeDirty returns the MeshMultiZoneServices whose status may have
// changed since the last call, sorted by mesh and name, and forgets them.
// Deleted ones are left out.
func (c *Engine) TakeDirty() []resource.Key {
	c.settle()
	keys := make([]resource.Key, 0, len(c.dirty))
	for _, a := range c.dirty {
		a.dirty = false
		if !a.deleted {
			keys = append(keys, a.key)
		}
	}
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	slices.SortFunc(keys, func(a, b resource.Key) int {
		if a.Mesh != b.Mesh {
			return strings.Compare(a.Mesh, b.Mesh)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return keys
}

// Status returns what the status of the MeshMultiZoneService k shows, and
// false when the engine does not hold k.
func (c *Engine) Status(k resource.Key) (Result, bool) {
	c.settle()
	m := c.meshes[k.Mesh]
	if m == nil || k.Kind != resource.MeshMultiZoneService {
		return Result{}, false
	}
	a := m.mzs[k.Name]
	if a == nil {
		return Result{}, false
	}
	members := make([]member, 0, len(a.matched))
	for name := range a.matched {
		members = append(members, c.member(name, m.svcs[name]))
	}
	return build(k.Mesh, a.sel, a.declared, members), true
}

// member returns what a status shows of the service name.
func (c *Engine) member(name string, s string) member {
	labels, ports := splitService(s)
	mb := member{name: name, display: name, zone: c.zone, ports: ports}
	if v, ok := label(labels, name, resource.LabelDisplayName); ok {
		mb.display = v
	}
	if v, ok := label(labels, name, resource.LabelZone); ok {
		mb.zone = v
	}
	mb.namespace, _ = label(labels, name, resource.LabelNamespace)
	return mb
}

// Sizes returns how many MeshServices and MeshMultiZoneServices the engine
// holds.
func (c *Engine) Sizes() (services, multiZoneServices int) {
	for _, m := range c.meshes {
		services += len(m.svcs)
		multiZoneServices += len(m.mzs)
	}
	return services, multiZoneServices
}

// selectorOf reads spec.selector.meshService.
func selectorOf(spec *resource.MeshMultiZoneServiceSpec) selector {
	if spec == nil || spec.Selector.MeshService == nil {
		return selector{}
	}
	ls := spec.Selector.MeshService
	s := selector{set: true}
	for k, v := range ls.MatchLabels {
		s.pairs = append(s.pairs, pair{k, v})
	}
	slices.SortFunc(s.pairs, func(a, b pair) int { return strings.Compare(a.k, b.k) })
	return s
}

// declaredPorts returns spec.ports as status.ports shows them (no
// targetPort, the protocol defaulted), or nil when none are declared.
func declaredPorts(spec *resource.MeshMultiZoneServiceSpec) []resource.Port {
	if spec == nil || len(spec.Ports) == 0 {
		return nil
	}
	out := make([]resource.Port, len(spec.Ports))
	for i, p := range spec.Ports {
		out[i] = resource.Port{Name: p.Name, Port: p.Port, AppProtocol: protocol(p.AppProtocol)}
	}
	return out
}
