package hostname

import (
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"time"

	"github.com/meshnames/meshnames/internal/validate"
)

// This file holds the pure, incremental core of hostname generation: given
// generators and services it decides every service's addresses, with
// precedence and collisions (seeds 000 and 001, ARCHITECTURE.md section 4).
//
// The engine knows nothing of stores or resources; the hostnames controller
// feeds it and writes what it returns. It is deterministic: the addresses of
// a service depend only on the current generators and services, not on the
// order in which they were set, which TestEngine_IncrementalEqualsFromScratch
// checks.
//
// Mechanism: each service keeps its renders (one per generator that selects
// it, in generator precedence order), and each mesh keeps a claims index,
// hostname -> claimants ordered by priority. A claim's priority is its
// generator's precedence, then its service's: that is seed 000's loop ("take
// each HostnameGenerator in precedence order, then the services oldest
// first"), so the first claimant in the index holds the name. The index
// covers every service kind of the mesh, so a MeshService and a
// MeshExternalService cannot share a name (Kuma checks per kind only).
//
// A service may also name itself: the InternalVIP values of a
// MeshExternalService (seed 003) are written by hand in its spec, and the
// ServiceTag identities of a MeshService give it service-tag names and
// their aliases (seed 004). Such an own name claims its place in the same
// index, through a pseudo-generator per Source: InternalVIP values are
// listed before every HostnameGenerator's claims, service-tag names after
// them, and their aliases last (Source.rank). Between the claims of one
// source the older service wins, then the name. An InternalVIP value and a
// generated name compete by age (claimList.holder): the claim that came to
// be first - the value when its service was created, a generated one when
// both its service and its generator existed - holds the name, so that a
// name held never moves to a newer claim because someone wrote a resource,
// whatever the kinds, while generated names keep seed 000's order among
// themselves. A service-tag name or alias holds a name only when no
// InternalVIP value or generated name claims it. The holder of a contested
// name says who else claims it, and each loser says who holds it, so that
// a clash is visible on both sides. So every name a service answers to,
// over DNS or to proxies, is decided here once, and written into
// status.addresses, which every instance reads.
//
// A change re-renders only what it can affect - a service change that
// service, a generator change that generator's render of the services it
// selected before or selects after - and touches only the claims that
// differ. It marks dirty every service whose addresses may have changed:
// the changed services, and every claimant of each name whose holder
// changed, so that a loser is promoted the moment the winner leaves (and a
// loser coming or going does not rewrite the other losers).
//
// An Engine is not safe for concurrent use; the controller owns it.

// ServiceKey identifies a service: its kind (MeshService,
// MeshExternalService, MeshMultiZoneService), mesh and name.
type ServiceKey struct {
	Kind, Mesh, Name string
}

func (k ServiceKey) String() string { return k.Kind + " " + k.Mesh + "/" + k.Name }

// Service is what the engine needs of a service.
type Service struct {
	Key     ServiceKey
	Labels  map[string]string
	Created time.Time
	// OwnNames are the names the service gives itself: the InternalVIP
	// values of a MeshExternalService (seed 003). They take part in the
	// per-mesh uniqueness of names and come before generated names.
	OwnNames []string
	// TagNames are the service-tag names of a MeshService and their
	// aliases (seed 004; ServiceTagNames). They take part in the per-mesh
	// uniqueness of names after generated names.
	TagNames []TagName
}

// Generator is what the engine needs of a HostnameGenerator.
type Generator struct {
	Name string
	// Kind is the service kind the generator selects.
	Kind string
	// MatchLabels must all be present on a service, with equal values; an
	// empty map selects every service of Kind.
	MatchLabels map[string]string
	Template    *Template
	// Local is true for generators created in this zone (kuma.io/origin:
	// zone), which take precedence over those synced from global (seed 000).
	Local   bool
	Created time.Time
}

// Address is one outcome of a generator for a service.
type Address struct {
	// Hostname is the rendered name; empty when the template could not be
	// rendered, the invalid result when it rendered something that is not
	// a DNS name.
	Hostname string
	// Generator names the generator of a Generated name; it is empty for
	// the names a service gives itself (the other sources).
	Generator string
	Source    Source
	Available bool
	// Reason says why the address is not available, or, for an available
	// one, who else claims the name.
	Reason string
}

// Label keys the engine reads (repeated from internal/resource, which this
// leaf package must not import).
const (
	labelDisplayName = "kuma.io/display-name"
	labelNamespace   = "k8s.kuma.io/namespace"
	labelServiceName = "k8s.kuma.io/service-name"
	labelZone        = "kuma.io/zone"
)

type genState struct {
	Generator
	// match is the selector (Generator.MatchLabels) in the engine's form.
	match labelSet
	// src is Generated for a HostnameGenerator, the source of the names
	// of the engine's pseudo-generators otherwise.
	src Source
}

func newGenState(g Generator) *genState {
	return &genState{Generator: g, match: labelSetOf("", g.MatchLabels)}
}

// before reports whether g takes precedence over o: by source (rank),
// then, between generators, local before synced, then older, then by name
// (seed 000).
func (g *genState) before(o *genState) bool {
	if g.src != o.src {
		return g.src.rank() < o.src.rank()
	}
	if g.Local != o.Local {
		return g.Local
	}
	if !g.Created.Equal(o.Created) {
		return g.Created.Before(o.Created)
	}
	return g.Name < o.Name
}

// selects reports whether g selects the service k with labels.
func (g *genState) selects(k ServiceKey, labels labelSet) bool {
	return g.Kind == k.Kind && labels.contains(k.Name, g.match)
}

// svcState is what the engine keeps of a service. There is one per
// service, so it is kept small: the labels in their compact form, the
// creation time without its location, and no copy of the names it gives
// itself, which are the hosts of the renders of the pseudo-generators: its
// InternalVIP values first, its service-tag names last.
type svcState struct {
	key     ServiceKey
	labels  labelSet
	renders []render
	// sec and nsec are the creation time (Unix seconds and nanoseconds):
	// only its instant matters.
	sec  int64
	nsec int32
	// dirty is set while the service is in Engine.dirty; deleted once it
	// has been removed, so that TakeDirty skips it.
	dirty, deleted bool
}

// before reports whether s takes precedence over o for a name: older, then
// by name, then by kind.
func (s *svcState) before(o *svcState) bool {
	if s.sec != o.sec {
		return s.sec < o.sec
	}
	if s.nsec != o.nsec {
		return s.nsec < o.nsec
	}
	if s.key.Name != o.key.Name {
		return s.key.Name < o.key.Name
	}
	return s.key.Kind < o.key.Kind
}

// ownNamesEqual reports whether names, without repeats, are the
// InternalVIP values of s: the hosts of its first renders, in order.
func (s *svcState) ownNamesEqual(names []string) bool {
	i := 0
	for j, n := range names {
		if slices.Contains(names[:j], n) {
			continue
		}
		if i == len(s.renders) || s.renders[i].gen.src != InternalVIP || s.renders[i].host != n {
			return false
		}
		i++
	}
	return i == len(s.renders) || s.renders[i].gen.src != InternalVIP
}

// tagNamesEqual reports whether names, without repeated hosts, are the
// service-tag names of s: the hosts and sources of its last renders, in
// order.
func (s *svcState) tagNamesEqual(names []TagName) bool {
	i := slices.IndexFunc(s.renders, func(r render) bool { return r.gen.src.isTag() })
	if i < 0 {
		i = len(s.renders)
	}
	for j, n := range names {
		if slices.ContainsFunc(names[:j], func(p TagName) bool { return p.Host == n.Host }) {
			continue
		}
		if i == len(s.renders) || s.renders[i].host != n.Host || s.renders[i].gen.src != tagSource(n) {
			return false
		}
		i++
	}
	return i == len(s.renders)
}

// render is one generator's result for one service. There is one per
// service and generator that selects it, so it is kept to 40 bytes: the
// reason of the rare render that is not a valid name is a pointer.
type render struct {
	gen  *genState
	host string
	err  *string // why it did not render to a valid name; nil when it did
	// list is the claims index entry of host when this render claims it,
	// so that neither Addresses nor a release has to look the name up; nil
	// otherwise. Between operations every render with a valid name claims
	// it, but a dup: see dup.
	list *claimList
}

// dup reports, between operations, whether r is a valid name an earlier
// (higher precedence) render of its service already has: not a collision,
// and not listed twice. Such a render is the only one with a valid name
// that claims nothing, so it needs no flag of its own.
func (r *render) dup() bool { return r.err == nil && r.list == nil }

// Engine computes the addresses of services. The zero value is not usable;
// call NewEngine.
type Engine struct {
	zone  string
	gens  map[string]*genState
	order []*genState // by precedence
	// own, tag and alias are the pseudo-generators of the names services
	// give themselves: InternalVIP values, service-tag names, aliases.
	own, tag, alias *genState

	svcs   *hashIndex[ServiceKey, svcState]
	labels *sharedLabels         // of the services
	claims map[string]*meshNames // by mesh
	seed   maphash.Seed
	// hashMask is ANDed into every name hash; all ones except in tests,
	// which narrow it to make names share hashes.
	hashMask uint64
	// names counts the entries of all meshes.
	names int
	// dirty lists the services whose addresses may have changed since the
	// last TakeDirty, each once (a flag on the service rather than a set
	// keyed by ServiceKey: a full computation marks a service once per
	// name, and hashing three strings each time showed in profiles).
	dirty []*svcState
	// touched collects the names an operation claimed or released.
	touched []touched
}

// touched is a name an operation changed, with its holder before and the
// index of its mesh.
type touched struct {
	list   *claimList
	holder claim // zero when the name had no claimant
	names  *meshNames
}

// NewEngine returns an empty engine for a control plane in zone (the value
// of .Zone for services without a kuma.io/zone label).
func NewEngine(zone string) *Engine {
	return &Engine{
		zone:     zone,
		gens:     map[string]*genState{},
		own:      &genState{src: InternalVIP},
		tag:      &genState{src: ServiceTag},
		alias:    &genState{src: ServiceTagAlias},
		svcs:     newHashIndex(func(s *svcState) ServiceKey { return s.key }),
		labels:   newSharedLabels(),
		claims:   map[string]*meshNames{},
		seed:     maphash.MakeSeed(),
		hashMask: ^uint64(0),
	}
}

// SetGenerator adds or replaces the generator named g.Name.
func (e *Engine) SetGenerator(g Generator) {
	old := e.gens[g.Name]
	// The selector is kept as a labelSet, a copy: old.selects must see the
	// selector old was set with, even if the caller edits and passes the
	// same map again. Drop the caller's map.
	ng := newGenState(g)
	ng.MatchLabels = nil
	affected := e.selectedBy(old, ng)
	if old != nil {
		// Release old's names before ng claims any, so that no claims list
		// holds both (they compare equal when only the template changed).
		for _, s := range affected {
			e.release(s, old)
		}
		e.order = slices.DeleteFunc(e.order, func(x *genState) bool { return x == old })
	}
	e.gens[g.Name] = ng
	i := sort.Search(len(e.order), func(i int) bool { return ng.before(e.order[i]) })
	e.order = slices.Insert(e.order, i, ng)
	for _, s := range affected {
		e.update(s, Service{}, true)
	}
	e.settle()
}

// DeleteGenerator removes the generator named name.
func (e *Engine) DeleteGenerator(name string) {
	old := e.gens[name]
	if old == nil {
		return
	}
	affected := e.selectedBy(old, nil)
	delete(e.gens, name)
	e.order = slices.DeleteFunc(e.order, func(x *genState) bool { return x == old })
	// update releases old's claims: old is no longer in e.order.
	for _, s := range affected {
		e.update(s, Service{}, true)
	}
	e.settle()
}

// selectedBy returns the services either generator selects, each once.
func (e *Engine) selectedBy(a, b *genState) []*svcState {
	var out []*svcState
	for s := range e.svcs.all {
		if (a != nil && a.selects(s.key, s.labels)) || (b != nil && b.selects(s.key, s.labels)) {
			out = append(out, s)
		}
	}
	return out
}

// SetService adds or replaces the service s.Key. Setting a service with
// the same labels, own names, tag names and creation time again does
// nothing. The engine keeps none of s's maps or slices.
func (e *Engine) SetService(s Service) {
	sec, nsec := s.Created.Unix(), int32(s.Created.Nanosecond())
	h := e.keyHash(s.Key)
	cur := e.svcs.get(h, s.Key)
	switch {
	case cur == nil:
		cur = &svcState{key: s.Key, sec: sec, nsec: nsec}
		e.svcs.add(h, cur)
	case cur.sec != sec || cur.nsec != nsec:
		// Its priority changes, so every claim of it moves.
		e.release(cur, nil)
		cur.sec, cur.nsec = sec, nsec
	case cur.labels.equalMap(s.Key.Name, s.Labels) && cur.ownNamesEqual(s.OwnNames) && cur.tagNamesEqual(s.TagNames):
		return
	}
	if !cur.labels.equalMap(s.Key.Name, s.Labels) {
		e.labels.release(cur.labels)
		cur.labels = e.labels.hold(s.Key.Name, s.Labels)
	}
	e.update(cur, s, false)
	e.settle()
}

// DeleteService removes the service k.
func (e *Engine) DeleteService(k ServiceKey) {
	h := e.keyHash(k)
	cur := e.svcs.get(h, k)
	if cur == nil {
		return
	}
	e.release(cur, nil)
	e.svcs.remove(h, cur)
	e.labels.release(cur.labels)
	e.settle()
	cur.deleted = true
}

// release drops the claims of s made through g, or all its claims when g
// is nil.
func (e *Engine) release(s *svcState, g *genState) {
	for i := range s.renders {
		r := &s.renders[i]
		if r.list != nil && (g == nil || r.gen == g) {
			e.unclaim(s, r)
		}
	}
}

// unclaim drops the claim of render r of s.
func (e *Engine) unclaim(s *svcState, r *render) {
	l := r.list
	e.touch(l, e.claims[s.key.Mesh])
	l.setClaims(slices.DeleteFunc(l.claims(), func(c claim) bool { return c.svc == s && c.gen == r.gen }))
	r.list = nil
}

// update recomputes the renders of s and brings its claims in line,
// touching only the names whose claims change, and marks s dirty. in
// gives the names the service gives itself (repeats are skipped).
//
// When reuse is set the service has not changed, only a generator: in is
// ignored and the renders of the pseudo-generators are kept, the render of
// every generator s already had a render from is taken from before, and
// only the new generator (a new *genState) is rendered. A generator change
// thus renders each service it selects once, not once per generator that
// selects it.
func (e *Engine) update(s *svcState, in Service, reuse bool) {
	// Collect on the stack, then copy once to a slice of the right size:
	// the renders live as long as the service.
	var buf [16]render
	rs := buf[:0]
	if reuse {
		for _, r := range s.renders {
			if r.gen.src != InternalVIP {
				break
			}
			rs = append(rs, render{gen: r.gen, host: r.host, err: r.err})
		}
	} else {
		for j, n := range in.OwnNames {
			if slices.Contains(in.OwnNames[:j], n) {
				continue
			}
			r := render{gen: e.own, host: n}
			if rule := validate.DNS1123Subdomain(n); rule != "" {
				// Admission refuses such a value; one stored under older rules names nothing.
				r.err = ptr(fmt.Sprintf("InternalVIP value %q is not a valid DNS name: %s", n, rule))
			}
			rs = append(rs, r)
		}
	}
	var vars *Vars
	for _, g := range e.order {
		if !g.selects(s.key, s.labels) {
			continue
		}
		if reuse {
			if i := slices.IndexFunc(s.renders, func(r render) bool { return r.gen == g }); i >= 0 {
				rs = append(rs, render{gen: g, host: s.renders[i].host, err: s.renders[i].err})
				continue
			}
		}
		if vars == nil {
			vars = e.vars(s.key, s.labels)
		}
		rs = append(rs, e.render(g, vars))
	}
	if reuse {
		for _, r := range s.renders {
			if r.gen.src.isTag() {
				rs = append(rs, render{gen: r.gen, host: r.host, err: r.err})
			}
		}
	} else {
		for j, n := range in.TagNames {
			if slices.ContainsFunc(in.TagNames[:j], func(p TagName) bool { return p.Host == n.Host }) {
				continue
			}
			r := render{gen: e.tag, host: n.Host}
			if n.Alias {
				r.gen = e.alias
			}
			if why := checkTagName(n.Host); why != "" {
				r.err = ptr(fmt.Sprintf("the name %q of service tag %q is not a valid DNS name: %s", n.Host, n.Tag, why))
			}
			rs = append(rs, r)
		}
	}
	// claims[i] tells whether rs[i] claims its name: a valid name that no
	// earlier render has (the others are dups).
	var claimsBuf [16]bool
	claims := claimsBuf[:0]
	for i := range rs {
		r := &rs[i]
		claims = append(claims, r.err == nil && !slices.ContainsFunc(rs[:i], func(p render) bool { return p.err == nil && p.host == r.host }))
	}
	// Keep the claims that stay (same generator, same name, and the
	// service's priority is unchanged, so their place in the lists too);
	// release the others.
	for i := range s.renders {
		r := &s.renders[i]
		if r.list == nil {
			continue
		}
		j := slices.IndexFunc(rs, func(n render) bool { return n.gen == r.gen && n.host == r.host && n.err == nil })
		if j >= 0 && claims[j] {
			rs[j].list = r.list
		} else {
			e.unclaim(s, r)
		}
	}
	var names *meshNames // looked up at the first new claim
	for i := range rs {
		r := &rs[i]
		if !claims[i] || r.list != nil {
			continue
		}
		if names == nil {
			names = e.claims[s.key.Mesh]
			if names == nil {
				names = newMeshNames()
				e.claims[s.key.Mesh] = names
			}
		}
		r.list = e.claim(names, s, r.gen, r.host)
	}
	// The renders live as long as the service: reuse their slice when it
	// has exactly the room, else make one of exactly their number.
	if cap(s.renders) == len(rs) {
		s.renders = append(s.renders[:0], rs...)
	} else if len(rs) == 0 {
		s.renders = nil
	} else {
		s.renders = make([]render, len(rs))
		copy(s.renders, rs)
	}
	e.markDirty(s)
}

// render renders g for a service.
func (e *Engine) render(g *genState, vars *Vars) render {
	r := render{gen: g}
	host, err := g.Template.render(vars, false)
	if err != nil {
		r.err = ptr(err.Error())
		if inv, ok := err.(*InvalidNameError); ok {
			r.host = inv.Hostname
		}
		return r
	}
	r.host = host
	return r
}

func ptr(s string) *string { return &s }

func (e *Engine) markDirty(s *svcState) {
	if !s.dirty {
		s.dirty = true
		e.dirty = append(e.dirty, s)
	}
}

// vars returns the template values of service k with labels, as
// Template.Render would use them. update calls Template.render with them
// directly: Render takes Vars by value, which costs an allocation per
// render, and a full computation renders every service once per generator.
func (e *Engine) vars(k ServiceKey, labels labelSet) *Vars {
	v := &Vars{Name: k.Name, Mesh: k.Mesh, labels: labels, compact: true}
	v.DisplayName, _ = labels.get(k.Name, labelDisplayName)
	v.Namespace, _ = labels.get(k.Name, labelNamespace)
	v.Zone, _ = labels.get(k.Name, labelZone)
	if v.Zone == "" {
		v.Zone = e.zone
	}
	if v.DisplayName == "" {
		v.DisplayName = v.Name // as in Render (seed 001)
	}
	return v
}

// TakeDirty returns the services whose addresses may have changed since
// the last call, and forgets them.
func (e *Engine) TakeDirty() []ServiceKey {
	out := make([]ServiceKey, 0, len(e.dirty))
	for _, s := range e.dirty {
		s.dirty = false
		if !s.deleted {
			out = append(out, s.key)
		}
	}
	// Do not keep the backing array of a full computation for the small
	// changes that follow it.
	if cap(e.dirty) > 1024 {
		e.dirty = nil
	} else {
		clear(e.dirty)
		e.dirty = e.dirty[:0]
	}
	return out
}

// Addresses returns the addresses of service k in generator precedence
// order, or false when the engine does not know k. A name given to the
// service by several generators is listed once, under the first.
func (e *Engine) Addresses(k ServiceKey) ([]Address, bool) {
	s := e.svcs.get(e.keyHash(k), k)
	if s == nil {
		return nil, false
	}
	out := make([]Address, 0, len(s.renders))
	for _, r := range s.renders {
		if r.dup() {
			continue
		}
		a := Address{Hostname: r.host, Generator: r.gen.Name, Source: r.gen.src}
		if r.err != nil {
			a.Reason = *r.err
			out = append(out, a)
			continue
		}
		holder := r.list.claims()[r.list.holder()]
		switch others := r.list.others(); {
		case holder.svc != s:
			a.Reason = fmt.Sprintf("hostname %q is already taken by %s, which has precedence", r.host, holder)
		case len(others) == 1:
			a.Available = true
			a.Reason = fmt.Sprintf("also claimed by %s, which does not get it", others[0])
		case len(others) > 1:
			a.Available = true
			a.Reason = fmt.Sprintf("also claimed by %s and %d more, which do not get it", others[0], len(others)-1)
		default:
			a.Available = true
		}
		out = append(out, a)
	}
	return out, true
}

// Sizes reports how many generators, services and claimed names the
// engine holds (for metrics).
func (e *Engine) Sizes() (generators, services, hostnames int) {
	return len(e.gens), e.svcs.len(), e.names
}
