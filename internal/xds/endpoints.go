package xds

import (
	"net/netip"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

type set[K comparable] map[K]struct{}

func (s set[K]) add(k K) { s[k] = struct{}{} }

// endpointIndex finds the Dataplanes a service selects and the services
// a Dataplane feeds, without scanning a mesh on every change: services are
// indexed by the kuma.io/service value they select on (seed 004's common
// case) or the Dataplane they name; the rest (labels, tags without
// kuma.io/service) are checked one by one. It is used by the builder's
// goroutine only.
type endpointIndex struct {
	byTag map[string]map[string]set[resource.Key] // mesh -> kuma.io/service -> services
	byRef map[string]map[string]set[resource.Key] // mesh -> Dataplane name -> services
	other map[string]set[resource.Key]            // mesh -> services selecting otherwise
	sel   map[resource.Key]selection              // what each service is indexed under

	dpByTag map[string]map[string]set[string]          // mesh -> kuma.io/service -> Dataplanes
	dpTags  map[resource.Key][]string                  // Dataplane -> its kuma.io/service values
	feeds   map[resource.Key]set[resource.Key]         // Dataplane -> services it is an endpoint of
	fedBy   map[resource.Key]set[resource.Key]         // service -> its Dataplanes
	specs   map[resource.Key]*resource.MeshServiceSpec // services of set "other", for matching
}

// selection is how a service selects its Dataplanes, as indexed.
type selection struct {
	how   int // selTag, selRef, selOther, selNone
	value string
}

const (
	selNone = iota
	selTag
	selRef
	selOther
)

func newEndpointIndex() *endpointIndex {
	return &endpointIndex{
		byTag: map[string]map[string]set[resource.Key]{}, byRef: map[string]map[string]set[resource.Key]{},
		other: map[string]set[resource.Key]{}, sel: map[resource.Key]selection{},
		dpByTag: map[string]map[string]set[string]{}, dpTags: map[resource.Key][]string{},
		feeds: map[resource.Key]set[resource.Key]{}, fedBy: map[resource.Key]set[resource.Key]{},
		specs: map[resource.Key]*resource.MeshServiceSpec{},
	}
}

func selectionOf(spec *resource.MeshServiceSpec) selection {
	sel := spec.Selector
	switch {
	case len(sel.DataplaneTags) > 0:
		if v, ok := sel.DataplaneTags[resource.TagService]; ok {
			return selection{selTag, v}
		}
		return selection{how: selOther}
	case sel.DataplaneRef != nil:
		return selection{selRef, sel.DataplaneRef.Name}
	case sel.DataplaneLabels != nil:
		return selection{how: selOther}
	}
	return selection{how: selNone}
}

func addTo[K comparable](m map[string]map[string]set[K], mesh, v string, k K) {
	if m[mesh] == nil {
		m[mesh] = map[string]set[K]{}
	}
	if m[mesh][v] == nil {
		m[mesh][v] = set[K]{}
	}
	m[mesh][v].add(k)
}

func removeFrom[K comparable](m map[string]map[string]set[K], mesh, v string, k K) {
	s := m[mesh][v]
	delete(s, k)
	if len(s) == 0 {
		delete(m[mesh], v)
	}
}

// index records how the service k selects.
func (ix *endpointIndex) index(k resource.Key, spec *resource.MeshServiceSpec) {
	ix.unindex(k)
	s := selectionOf(spec)
	ix.sel[k] = s
	switch s.how {
	case selTag:
		addTo(ix.byTag, k.Mesh, s.value, k)
	case selRef:
		addTo(ix.byRef, k.Mesh, s.value, k)
	case selOther:
		if ix.other[k.Mesh] == nil {
			ix.other[k.Mesh] = set[resource.Key]{}
		}
		ix.other[k.Mesh].add(k)
		ix.specs[k] = spec
	}
}

func (ix *endpointIndex) unindex(k resource.Key) {
	s, ok := ix.sel[k]
	if !ok {
		return
	}
	delete(ix.sel, k)
	switch s.how {
	case selTag:
		removeFrom(ix.byTag, k.Mesh, s.value, k)
	case selRef:
		removeFrom(ix.byRef, k.Mesh, s.value, k)
	case selOther:
		delete(ix.other[k.Mesh], k)
		delete(ix.specs, k)
	}
}

// serviceGone forgets the service k (deleted, or not local).
func (ix *endpointIndex) serviceGone(k resource.Key) {
	ix.unindex(k)
	ix.setFeeds(k, nil)
}

// setFeeds records dps as the Dataplanes of service k.
func (ix *endpointIndex) setFeeds(k resource.Key, dps set[resource.Key]) {
	for dp := range ix.fedBy[k] {
		if _, still := dps[dp]; !still {
			delete(ix.feeds[dp], k)
			if len(ix.feeds[dp]) == 0 {
				delete(ix.feeds, dp)
			}
		}
	}
	for dp := range dps {
		if ix.feeds[dp] == nil {
			ix.feeds[dp] = set[resource.Key]{}
		}
		ix.feeds[dp].add(k)
	}
	if len(dps) == 0 {
		delete(ix.fedBy, k)
	} else {
		ix.fedBy[k] = dps
	}
}

// dataplaneChanged re-indexes the Dataplane k (dp nil when deleted) and
// returns the services whose endpoints it may change: those it fed, and
// those that may select it now.
func (ix *endpointIndex) dataplaneChanged(k resource.Key, dp *resource.Object) []resource.Key {
	affected := set[resource.Key]{}
	for s := range ix.feeds[k] {
		affected.add(s)
	}
	for _, v := range ix.dpTags[k] {
		removeFrom(ix.dpByTag, k.Mesh, v, k.Name)
	}
	delete(ix.dpTags, k)
	if dp != nil {
		spec := dp.Spec.(*resource.DataplaneSpec)
		var tags []string
		for _, in := range spec.Networking.Inbound {
			if v, ok := in.Tags[resource.TagService]; ok {
				tags = append(tags, v)
				addTo(ix.dpByTag, k.Mesh, v, k.Name)
			}
		}
		if len(tags) > 0 {
			ix.dpTags[k] = tags
		}
		for _, v := range tags {
			for s := range ix.byTag[k.Mesh][v] {
				affected.add(s)
			}
		}
		for s := range ix.byRef[k.Mesh][k.Name] {
			affected.add(s)
		}
		for s := range ix.other[k.Mesh] {
			if selects(ix.specs[s], dp) {
				affected.add(s)
			}
		}
	}
	out := make([]resource.Key, 0, len(affected))
	for s := range affected {
		out = append(out, s)
	}
	return out
}

// selects reports whether spec selects some inbound of dp.
func selects(spec *resource.MeshServiceSpec, dp *resource.Object) bool {
	sel := spec.Selector
	switch {
	case len(sel.DataplaneTags) > 0:
		for _, in := range dp.Spec.(*resource.DataplaneSpec).Networking.Inbound {
			if tagsMatch(sel.DataplaneTags, in.Tags) {
				return true
			}
		}
		return false
	case sel.DataplaneRef != nil:
		return sel.DataplaneRef.Name == dp.Name
	case sel.DataplaneLabels != nil:
		return sel.DataplaneLabels.Matches(dp.Labels)
	}
	return false
}

func tagsMatch(want, tags map[string]string) bool {
	for k, v := range want {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// endpoints indexes the local service o and returns its endpoints by
// service port: the address and port of every Ready inbound it selects.
func (ix *endpointIndex) endpoints(c *cache.Cache, o *resource.Object, spec *resource.MeshServiceSpec, zone string) map[int][]Endpoint {
	k := o.Key()
	ix.index(k, spec)
	var candidates []*resource.Object
	peek := func(name string) {
		if dp, ok := c.Peek(resource.Key{Kind: resource.Dataplane, Mesh: k.Mesh, Name: name}); ok {
			candidates = append(candidates, dp)
		}
	}
	switch s := ix.sel[k]; s.how {
	case selTag:
		for name := range ix.dpByTag[k.Mesh][s.value] {
			peek(name)
		}
	case selRef:
		peek(s.value)
	case selOther:
		q := cache.Query{Kind: resource.Dataplane, Mesh: k.Mesh, Unordered: true}
		if l := spec.Selector.DataplaneLabels; l != nil {
			q.Labels = l.MatchLabels
		}
		c.Scan(q, func(dp *resource.Object) { candidates = append(candidates, dp) })
	}
	fed := set[resource.Key]{}
	out := map[int][]Endpoint{}
	for _, dp := range candidates {
		ds := dp.Spec.(*resource.DataplaneSpec)
		addr, err := netip.ParseAddr(ds.Networking.Address)
		selected := false
		for i := range ds.Networking.Inbound {
			in := &ds.Networking.Inbound[i]
			if in.State == resource.InboundIgnored {
				continue
			}
			if len(spec.Selector.DataplaneTags) > 0 && !tagsMatch(spec.Selector.DataplaneTags, in.Tags) {
				continue
			}
			if spec.Selector.DataplaneLabels != nil && !spec.Selector.DataplaneLabels.Matches(dp.Labels) {
				continue
			}
			selected = true
			if err != nil || !in.Ready() {
				continue // a DNS name is no EDS endpoint; NotReady takes no traffic
			}
			for _, p := range spec.Ports {
				if targets(p, in) {
					out[p.Port] = append(out[p.Port], Endpoint{Addr: netip.AddrPortFrom(addr, uint16(in.Port)), Zone: zone})
				}
			}
		}
		if selected {
			fed.add(dp.Key())
		}
	}
	ix.setFeeds(k, fed)
	return out
}

// targets reports whether the service port p is served by inbound in:
// its targetPort names the inbound or gives its port; without one, the
// inbound listens on the service port.
func targets(p resource.Port, in *resource.Inbound) bool {
	switch t := p.TargetPort; {
	case t == nil:
		return in.Port == p.Port
	case t.IsName:
		return in.Name == t.String
	default:
		return in.Port == t.Int
	}
}
