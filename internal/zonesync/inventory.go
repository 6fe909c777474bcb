package zonesync

import (
	"sync"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// A resumed stream sends only what changed since the peer's position, so
// it trusts the peer to hold everything from before. What it missed (a
// batch it refused whole, a store restored from an older backup or
// damaged) would stay missing until that resource changed again; a stream
// that always began with a full state, as Kuma's does, would repair it on
// every reconnect, at the price of sending everything every time.
//
// So once a stream settles (the sender has sent the receiver nothing for a
// heartbeat), and again each time it settles after sending the receiver
// something (at most every inventoryEvery heartbeats), the sender sends an
// inventory (link.sendInventory) of what
// the receiver should then hold of its resources: how many, and the sum of
// their key hashes as the receiver names them. The receiver compares it
// with its own after applying everything before it on the stream and, when
// they differ, asks for a full state, which also deletes what it holds
// and should not; it asks once per stream (the sender sends one full state
// per stream). The sum is order-free and costs 16 bytes on the wire; each
// inventory costs both ends a pass over what the receiver holds of the
// sender's (the global's is shared by every zone's stream at one
// revision), once per burst of changes and at most once a minute at the
// default heartbeat.

// inventory is a count of keys and the sum of their keyHash.
type inventory struct {
	count int64
	sum   uint64
}

func (v *inventory) add(k resource.Key) {
	v.count++
	v.sum += keyHash(k)
}

func (v *inventory) merge(o inventory) {
	v.count += o.count
	v.sum += o.sum
}

func (v inventory) wire(revision int64) *pb.Inventory {
	return &pb.Inventory{Revision: revision, Count: v.count, Sum: v.sum}
}

// heldInventory sums the keys of what this side holds from the peer.
func heldInventory(s side) inventory {
	var v inventory
	for _, k := range s.owned() {
		v.add(k)
	}
	return v
}

// expected returns what the global should hold of this zone's resources,
// as the cache holds them now: what zoneOut.put sends, named as
// acceptFromZone names it. It reads labels only.
func (z *zoneSide) expected() inventory {
	var v inventory
	for _, d := range resource.Descriptors() {
		if !fromZone(d.Kind) {
			continue
		}
		for _, k := range z.cache.Keys(cache.Query{Kind: d.Kind, Unordered: true}) {
			origin, _ := z.cache.Label(k, resource.LabelOrigin)
			if !z.out.sends(k.Kind, origin) {
				continue
			}
			ns, _ := z.cache.Label(k, resource.LabelNamespace)
			v.add(globalKey(k, z.zone, ns))
		}
	}
	return v
}

// expected returns what the zone should hold of the global's resources,
// as the cache holds them now.
func (g *globalSide) expected() inventory {
	parts := g.inventories.parts(g.cache, g.out)
	var v inventory
	for from, p := range parts {
		if send, asDelete := g.out.forZone(g.zone, from); send && !asDelete {
			v.merge(p)
		}
	}
	return v
}

// inventories is what every zone gets of the global's resources, by the
// zone they came from ("" for the global's own), computed once per
// revision of the cache for all the streams of a global: it decodes every
// MeshService (their export mode is in the spec), and the streams of a
// settled global all ask at the same revision.
type inventories struct {
	mu     sync.Mutex
	rev    int64
	byZone map[string]inventory
}

func (iv *inventories) parts(c *cache.Cache, out globalOut) map[string]inventory {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	rev := c.Revision()
	if iv.byZone != nil && iv.rev == rev {
		return iv.byZone
	}
	byZone := map[string]inventory{}
	for _, d := range resource.Descriptors() {
		if !fromGlobal(d.Kind) {
			continue
		}
		c.Scan(cache.Query{Kind: d.Kind, Unordered: true}, func(obj *resource.Object) {
			if k, from, fl := out.target(obj); fl == flowPut {
				v := byZone[from]
				v.add(k)
				byZone[from] = v
			}
		})
	}
	if c.Revision() == rev { // else a mix of two revisions: not for the next stream
		iv.rev, iv.byZone = rev, byZone
	}
	return byZone
}
