package zonesync

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// globalSide is the global's end of zone's stream.
type globalSide struct {
	zone  string
	cache *cache.Cache
	out   globalOut
	// inventories is shared by the streams of one global.
	inventories *inventories

	mu      sync.Mutex
	enabled map[string]zoneEnabled // by zone: what enabled read last
}

// zoneEnabled is spec.enabled of a Zone at one revision of it.
type zoneEnabled struct {
	rev     int64
	enabled bool
}

func newGlobalSide(zone string, c *cache.Cache, exportDefault string, iv *inventories) *globalSide {
	g := &globalSide{zone: zone, cache: c, inventories: iv, enabled: map[string]zoneEnabled{}}
	g.out = globalOut{exportDefault: exportDefault, enabled: g.zoneEnabled}
	return g
}

// zoneEnabled reports whether a zone's services go to other zones: unless
// its Zone says spec.enabled: false (a zone without a Zone resource is
// enabled). It is asked for every service sent, so it decodes a Zone only
// when its revision changed.
func (g *globalSide) zoneEnabled(zone string) bool {
	k := resource.Key{Kind: resource.Zone, Name: zone}
	rev, ok := g.cache.RevisionOf(k)
	if !ok {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.enabled[zone]; ok && m.rev == rev {
		return m.enabled
	}
	z, ok := g.cache.Peek(k)
	if !ok {
		return true
	}
	e := z.Spec.(*resource.ZoneSpec).Enabled
	m := zoneEnabled{rev: z.Revision, enabled: e == nil || *e}
	g.enabled[zone] = m
	return m.enabled
}

// prepare does not depend on the zone: a sharedFeed prepares for all
// zones' streams.
func (g *globalSide) prepare(obj *resource.Object) (*outItem, error) {
	out, del, from := g.out.shared(obj)
	switch {
	case out != nil:
		return newOutItem(out, from)
	case del != nil:
		return deleteItem(*del, from), nil
	}
	return nil, nil
}

func (g *globalSide) pass(it *outItem) (bool, bool) { return g.out.forZone(g.zone, it.from) }

func (g *globalSide) outTombstone(k resource.Key) (resource.Key, bool) { return g.out.tombstone(k) }

// related returns, for a change of a Zone, the services and ingresses of
// that zone: its spec.enabled decides whether they go to other zones. The creation of an
// enabled Zone (a zone connecting for the first time) changes nothing:
// without a Zone its services went to other zones already, so nothing is
// sent again (a stream behind the feed would otherwise encode every
// service of a new zone once more, for each zone).
func (g *globalSide) related(ctx context.Context, ev store.Event) []*resource.Object {
	if ev.Key.Kind != resource.Zone || ev.Key.Name == g.zone {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = g.cache.WaitFor(wctx, ev.Revision) // the services' fate reads the Zone from the cache
	if ev.Type == store.EventPut {
		if z, ok := g.cache.Peek(ev.Key); ok && z.Revision == ev.Revision && z.Version == 1 {
			if e := z.Spec.(*resource.ZoneSpec).Enabled; e == nil || *e {
				return nil
			}
		}
	}
	labels := map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: ev.Key.Name}
	objs, _ := g.cache.List(cache.Query{Kind: resource.MeshService, Labels: labels})
	ingresses, _ := g.cache.List(cache.Query{Kind: resource.ZoneIngress, Labels: labels})
	return append(objs, ingresses...)
}

// decode validates a zone's resource as the zone names it (a Kubernetes
// zone's "<object>.<namespace>" as its object), before accept renames it.
func (g *globalSide) decode(r *pb.Resource) (*resource.Object, error) { return DecodeResource(r) }

func (g *globalSide) accept(obj *resource.Object) (*resource.Object, error) {
	return acceptFromZone(obj, g.zone)
}

func (g *globalSide) writer() admission.Writer {
	return admission.Writer{Source: admission.FromZone, Zone: g.zone, Subject: "zone " + g.zone}
}

// resolver returns resolve for the deletions of one batch: it finds the
// global's copy of what the zone deleted as k. Its name hashes the zone's
// name with the namespace label it had, which a deletion does not carry.
// The name without a namespace is tried first, then, for a Kubernetes
// zone's "<object>.<namespace>", the object's name with that namespace
// (localName), and the zone's resources of that display name after.
//
// A zone resuming from an old position sends again deletions the global
// applied already, thousands after a long partition, each found by no
// name: the display names of the zone's resources are read once per batch
// and kind (byDisplay), not once per such deletion (a scan of every
// service of the mesh under the cache's lock, which held a global with
// 20,000 services applying one zone's batch for minutes).
func (g *globalSide) resolver() func(resource.Key) []resource.Key {
	return (&deletions{g: g, byDisplay: map[group]map[string][]nsKey{}}).resolve
}

// deletions resolves the deletions of one batch from a zone.
type deletions struct {
	g *globalSide
	// byDisplay is the zone's resources by display name, by kind and
	// mesh, read at the first deletion found by no name; reads counts
	// those reads
	byDisplay map[group]map[string][]nsKey
	reads     int
}

func (d *deletions) resolve(k resource.Key) []resource.Key {
	g := d.g
	if !fromZone(k.Kind) {
		return nil
	}
	type candidate struct{ local, ns string }
	candidates := []candidate{{k.Name, ""}}
	if i := strings.LastIndexByte(k.Name, '.'); i > 0 {
		candidates = append(candidates, candidate{k.Name[:i], k.Name[i+1:]})
	}
	for _, c := range candidates {
		direct := resource.Key{Kind: k.Kind, Mesh: k.Mesh, Name: HashedName(k.Kind, k.Mesh, c.local, g.zone, c.ns)}
		if _, ok := g.cache.Label(direct, resource.LabelZone); ok {
			return []resource.Key{direct}
		}
	}
	gr := group{k.Kind, k.Mesh}
	byDisplay, ok := d.byDisplay[gr]
	if !ok {
		byDisplay = g.byDisplay(k.Kind, k.Mesh)
		d.byDisplay[gr] = byDisplay
		d.reads++
	}
	var keys []resource.Key
	for _, e := range byDisplay[resource.DisplayName(k.Name)] {
		keys = append(keys, e.key)
	}
	if c := candidates[len(candidates)-1]; c.ns != "" {
		for _, e := range byDisplay[resource.DisplayName(c.local)] {
			if e.ns == c.ns {
				keys = append(keys, e.key)
			}
		}
	}
	return keys
}

// group is a kind and a mesh.
type group struct {
	kind resource.Kind
	mesh string
}

// nsKey is a resource's key and its namespace label.
type nsKey struct {
	key resource.Key
	ns  string
}

// byDisplay returns this zone's resources of kind in mesh by their display
// name, ordered by name.
func (g *globalSide) byDisplay(kind resource.Kind, mesh string) map[string][]nsKey {
	out := map[string][]nsKey{}
	keys := g.cache.Keys(cache.Query{Kind: kind, Mesh: mesh, Unordered: true, Labels: map[string]string{resource.LabelZone: g.zone}})
	slices.SortFunc(keys, func(a, b resource.Key) int { return strings.Compare(a.Name, b.Name) })
	for _, k := range keys {
		d, ok := g.cache.Label(k, resource.LabelDisplayName)
		if !ok {
			continue // deleted meanwhile
		}
		ns, _ := g.cache.Label(k, resource.LabelNamespace)
		out[d] = append(out[d], nsKey{k, ns})
	}
	return out
}

func (g *globalSide) owned() []resource.Key {
	var keys []resource.Key
	for _, d := range resource.Descriptors() {
		if fromZone(d.Kind) {
			keys = append(keys, g.cache.Keys(cache.Query{Kind: d.Kind, Unordered: true,
				Labels: map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: g.zone}})...)
		}
	}
	return keys
}

func (g *globalSide) keepStatus() bool { return true }

// zoneSide is a zone's end of its stream.
type zoneSide struct {
	zone  string
	cache *cache.Cache
	out   zoneOut
}

func (z *zoneSide) prepare(obj *resource.Object) (*outItem, error) {
	if out := z.out.put(obj); out != nil {
		return newOutItem(out, "")
	}
	return nil, nil
}

// known is the sender's store.Known: what the cache holds of the put of k
// at revision, when it holds that very write, or nothing when the global
// gets nothing of it: a kind that does not flow to global, or a resource
// that came from it (most of a zone's feed in a large federation), which
// the cache tells without decoding. When the cache holds another revision
// (it is behind, or k was written again since), the sender reads the
// write.
func (z *zoneSide) known(k resource.Key, revision int64) (*resource.Object, bool) {
	if rev, ok := z.cache.RevisionOf(k); !ok || rev != revision {
		return nil, false
	}
	if !fromZone(k.Kind) {
		return nil, true
	}
	if origin, _ := z.cache.Label(k, resource.LabelOrigin); origin == resource.OriginGlobal {
		return nil, true
	}
	return z.cache.At(k, revision)
}

func (z *zoneSide) pass(*outItem) (bool, bool) { return true, false }

func (z *zoneSide) outTombstone(k resource.Key) (resource.Key, bool) { return z.out.tombstone(k) }

func (z *zoneSide) related(context.Context, store.Event) []*resource.Object { return nil }

// decode leaves validation to admission: what a zone stores is the
// global's resource under the global's name, with the origin label and no
// status (acceptFromGlobal), which Admit validates whole; validating it
// on decoding too was 2.4% of a zone's CPU in the 10 x 10,000 sync
// (TestZoneReceive_RefusesBadInput).
func (z *zoneSide) decode(r *pb.Resource) (*resource.Object, error) { return decodeResource(r, false) }

func (z *zoneSide) accept(obj *resource.Object) (*resource.Object, error) {
	return acceptFromGlobal(obj, z.zone)
}

func (z *zoneSide) writer() admission.Writer {
	return admission.Writer{Source: admission.FromGlobal, Subject: "global"}
}

func (z *zoneSide) resolver() func(resource.Key) []resource.Key {
	return func(k resource.Key) []resource.Key {
		if !fromGlobal(k.Kind) {
			return nil
		}
		return []resource.Key{k}
	}
}

func (z *zoneSide) owned() []resource.Key {
	var keys []resource.Key
	for _, d := range resource.Descriptors() {
		if fromGlobal(d.Kind) {
			keys = append(keys, z.cache.Keys(cache.Query{Kind: d.Kind, Unordered: true,
				Labels: map[string]string{resource.LabelOrigin: resource.OriginGlobal}})...)
		}
	}
	return keys
}

func (z *zoneSide) keepStatus() bool { return false }
