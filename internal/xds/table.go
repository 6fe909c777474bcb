package xds

import (
	"encoding/hex"
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshnames/meshnames/internal/resource"
)

// entry is one resource of a mesh as every proxy of the mesh gets it:
// marshaled once, versioned by its content.
type entry struct {
	name    string
	version string
	sum     uint64 // entrySum(name, version), for response versions
	any     *anypb.Any
	owner   resource.Key
	port    int
	api     bool
	gen     uint64 // the mesh generation of its last change
	note    string // why the resource lacks something (inspection)
	// alt is the proxyless shape, when it differs.
	alt *variant
}

// variant is a resource's shape for some clients.
type variant struct {
	version string
	any     *anypb.Any
	sum     uint64 // entrySum(name, version)
}

// change is one name of a type that changed (or went) at gen.
type change struct {
	gen  uint64
	name string
}

// maxLog bounds each type's change log; a stream further behind than the
// log reaches does a full diff.
const maxLog = 1 << 16

// meshTable holds a mesh's resources. The builder writes it under mu;
// streams read it under mu.RLock and never send while holding it.
type meshTable struct {
	mu  sync.RWMutex
	gen uint64
	res [numTypes]map[string]*entry
	log [numTypes][]change
	// logFrom is the first generation the log still holds the changes
	// of (per type); a stream that sent gen >= logFrom-1 can diff by log.
	logFrom [numTypes]uint64
	// owners are the services of the mesh: their labels (for
	// reachableBackends) and the names of their resources.
	owners map[resource.Key]*owned
	// streams are the proxies of the mesh connected here.
	streams map[*stream]struct{}
	// dns is what the DNS listener was last rendered from (dnsfilter.go),
	// and dnsUsers the streams and inspections that get it: the builder
	// renders it only while there are some.
	dns      *dnsNames
	dnsUsers int
	// dnsAddr is the address of the DNS listener in the table, which
	// streams that get it there share.
	dnsAddr netip.AddrPort
	// dnsSelected counts the streams of dnsUsers whose reachableBackends
	// select services (under mu), and labelsGen the services that came,
	// went or changed labels: what such a selection takes of the names.
	dnsSelected int
	labelsGen   uint64
	// dnsVariants are the renderings of the DNS listener for streams
	// that get their own (dnsVariant), by address and selection, all made
	// from dnsVariantsOf (under dnsMu).
	dnsMu         sync.Mutex
	dnsVariants   map[string]sent
	dnsVariantsOf variantsOf

	// refs counts the uses of the table (streams, inspections) and
	// idleSince is when the last ended; both under Builder.mu.
	refs      int
	idleSince time.Time

	// sorted are the resources of each type in name order, for full
	// diffs to send without sorting 10,000 resources per proxy: kept
	// when a resource changes, dropped when a name comes or goes and
	// made again by the next full diff (under sortMu, as streams compute
	// under mu.RLock).
	sortMu sync.Mutex
	sorted [numTypes][]*entry
	// wildcard is, per type, what every plain wildcard subscription
	// (stream.plain) gets in full, made once for all of them (under
	// sortMu): without the DNS listener, and with it.
	wildcard [numTypes][2]*wildcardSet
	// typeGen is the generation of each type's last change.
	typeGen [numTypes]uint64
}

// wildcardSet is every resource of a type that a wildcard subscription
// without names or reachableBackends gets, at generation gen of the type:
// the same for every such proxy, so built and encoded once for all of
// them (a first config of 10,000 services is 30,000 resources and 8 MB).
type wildcardSet struct {
	gen       uint64
	resources []sent
	version   string
	once      [2]sync.Once // delta, state of the world
	body      [2][]byte
}

// encoded returns the response body (wire.go) of the set for a delta or
// state-of-the-world stream, encoded by the first stream that asks.
func (w *wildcardSet) encoded(delta bool, encode func() []byte) []byte {
	i := 1
	if delta {
		i = 0
	}
	w.once[i].Do(func() { w.body[i] = encode() })
	return w.body[i]
}

// owned is what the table keeps of a service.
type owned struct {
	labels map[string]string
	names  [numTypes][]string
	// notes are what inspection says of the service as a whole, or of
	// one of its ports (Resources without Msg).
	notes []note
}

type note struct {
	text string
	port int
}

func newMeshTable() *meshTable {
	t := &meshTable{owners: map[resource.Key]*owned{}, streams: map[*stream]struct{}{}}
	for i := range t.res {
		t.res[i] = map[string]*entry{}
		t.logFrom[i] = 1
	}
	return t
}

// put replaces the resources of the service k with rs (nil removes the
// service), under t.mu held for writing. It returns whether anything a
// proxy sees changed.
func (t *meshTable) put(k resource.Key, labels map[string]string, rs []Resource) bool {
	prev := t.owners[k]
	next := &owned{labels: labels}
	gen := t.gen + 1
	changed := false
	seen := map[string]bool{}
	for _, r := range rs {
		if r.Msg == nil {
			next.notes = append(next.notes, note{r.Note, r.Port})
			continue
		}
		key := string(rune('0'+r.Type)) + r.Name
		if seen[key] {
			continue // two hostnames that differ only in case render one listener
		}
		seen[key] = true
		a := mustAny(r.Msg)
		v := version(a.Value)
		var alt *variant
		if r.Proxyless != nil {
			pa := mustAny(r.Proxyless)
			pv := version(pa.Value)
			alt = &variant{pv, pa, entrySum(r.Name, pv)}
		}
		next.names[r.Type] = append(next.names[r.Type], r.Name)
		old := t.res[r.Type][r.Name]
		if old != nil && old.version == v && old.owner == k && old.port == r.Port && old.api == r.API && sameVariant(old.alt, alt) {
			old.note = r.Note
			continue
		}
		e := &entry{name: r.Name, version: v, sum: entrySum(r.Name, v), any: a, owner: k, port: r.Port, api: r.API, gen: gen, note: r.Note, alt: alt}
		t.res[r.Type][r.Name] = e
		t.resort(r.Type, old, e)
		t.logChange(r.Type, gen, r.Name)
		changed = true
	}
	if prev != nil {
		for typ, names := range prev.names {
			for _, n := range names {
				if seen[string(rune('0'+typ))+n] {
					continue
				}
				if e := t.res[typ][n]; e != nil && e.owner == k {
					delete(t.res[typ], n)
					t.resort(Type(typ), e, nil)
					t.logChange(Type(typ), gen, n)
					changed = true
				}
			}
		}
	}
	if rs == nil {
		delete(t.owners, k)
	} else {
		if prev != nil && !maps.Equal(prev.labels, labels) {
			changed = true // a label ref of reachableBackends may now select it
			for typ, names := range next.names {
				for _, n := range names {
					t.res[typ][n].gen = gen
					t.logChange(Type(typ), gen, n)
				}
			}
		}
		t.owners[k] = next
	}
	if (prev == nil) != (rs == nil) || (prev != nil && rs != nil && !maps.Equal(prev.labels, labels)) {
		// a service came, went or has other labels: what a proxy's
		// reachableBackends select of the DNS listener's names may differ
		if t.servicesChanged(k, gen) {
			changed = true
		}
	}
	if changed {
		t.gen = gen
	}
	return changed
}

// servicesChanged records that the owner k came, went or changed labels
// at gen: the renderings of the DNS listener for proxies that select
// services (dnsVariant) are then made again, and when some stream uses
// one, the listener counts as changed. It reports whether it did.
func (t *meshTable) servicesChanged(k resource.Key, gen uint64) bool {
	if isDNS(k) || isShared(k) {
		return false
	}
	t.labelsGen++
	e := t.res[ListenerType][DNSListenerName]
	if e == nil || t.dnsSelected == 0 {
		return false
	}
	e.gen = gen
	t.logChange(ListenerType, gen, DNSListenerName)
	return true
}

func sameVariant(a, b *variant) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.version == b.version
}

func (t *meshTable) logChange(typ Type, gen uint64, name string) {
	t.typeGen[typ] = gen
	l := append(t.log[typ], change{gen, name})
	if len(l) > maxLog {
		drop := len(l) - maxLog/2
		t.logFrom[typ] = l[drop].gen
		l = append(l[:0:0], l[drop:]...)
	}
	t.log[typ] = l
}

// since returns the names of typ changed after gen, and false when the
// log no longer reaches back that far (the caller then diffs in full).
// Under t.mu.RLock.
func (t *meshTable) since(typ Type, gen uint64) ([]string, bool) {
	if gen+1 < t.logFrom[typ] {
		return nil, false
	}
	l := t.log[typ]
	// the log is ordered by gen: find the first change after gen
	lo, hi := 0, len(l)
	for lo < hi {
		m := (lo + hi) / 2
		if l[m].gen <= gen {
			lo = m + 1
		} else {
			hi = m
		}
	}
	names := make([]string, 0, len(l)-lo)
	for _, c := range l[lo:] {
		names = append(names, c.name)
	}
	return names, true
}

// resort keeps t.sorted[typ] when old is replaced by e, and drops it
// when a name came (old nil) or went (e nil). Under t.mu held for writing.
func (t *meshTable) resort(typ Type, old, e *entry) {
	l := t.sorted[typ]
	if l == nil {
		return
	}
	if old == nil || e == nil {
		t.sorted[typ] = nil
		return
	}
	i, found := slices.BinarySearchFunc(l, e.name, func(x *entry, name string) int { return strings.Compare(x.name, name) })
	if !found {
		t.sorted[typ] = nil // cannot be: old was there
		return
	}
	l[i] = e
}

// sortedEntries returns the resources of typ in name order. Under
// t.mu.RLock; the caller must not change the slice.
func (t *meshTable) sortedEntries(typ Type) []*entry {
	t.sortMu.Lock()
	defer t.sortMu.Unlock()
	if t.sorted[typ] == nil {
		l := make([]*entry, 0, len(t.res[typ]))
		for _, e := range t.res[typ] {
			l = append(l, e)
		}
		slices.SortFunc(l, func(a, b *entry) int { return strings.Compare(a.name, b.name) })
		t.sorted[typ] = l
	}
	return t.sorted[typ]
}

// wildcardSet returns the resources of typ that every plain wildcard
// subscription gets, with the DNS listener or without it. Under
// t.mu.RLock.
func (t *meshTable) wildcardSet(typ Type, dns bool) *wildcardSet {
	l := t.sortedEntries(typ)
	t.sortMu.Lock()
	defer t.sortMu.Unlock()
	i := 0
	if dns && typ == ListenerType { // the other types are the same for both
		i = 1
	}
	if w := t.wildcard[typ][i]; w != nil && w.gen == t.typeGen[typ] {
		return w
	}
	w := &wildcardSet{gen: t.typeGen[typ], resources: make([]sent, 0, len(l))}
	for _, e := range l {
		if !e.api && (dns || !isDNS(e.owner)) {
			w.resources = append(w.resources, sent{e.name, e.version, e.any, e.sum})
		}
	}
	w.version = responseVersion(w.resources, nil)
	t.wildcard[typ][i] = w
	return w
}

// wake tells every stream of the mesh that it changed. It never blocks.
func (t *meshTable) wake() {
	for s := range t.streams {
		s.poke()
	}
}

// entrySum is the hash of a resource's name and version that response
// versions are made of.
func entrySum(name, version string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(version))
	return h.Sum64()
}

// version is the content hash of a marshaled resource: the same on every
// instance for the same resource.
func version(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
