package xds

import (
	"encoding/hex"
	"hash/fnv"
	"maps"
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

	// refs counts the uses of the table (streams, inspections) and
	// idleSince is when the last ended; both under Builder.mu.
	refs      int
	idleSince time.Time
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
			alt = &variant{version(pa.Value), pa}
		}
		next.names[r.Type] = append(next.names[r.Type], r.Name)
		old := t.res[r.Type][r.Name]
		if old != nil && old.version == v && old.owner == k && old.port == r.Port && old.api == r.API && sameVariant(old.alt, alt) {
			old.note = r.Note
			continue
		}
		t.res[r.Type][r.Name] = &entry{name: r.Name, version: v, any: a, owner: k, port: r.Port, api: r.API, gen: gen, note: r.Note, alt: alt}
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
	if changed {
		t.gen = gen
	}
	return changed
}

func sameVariant(a, b *variant) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.version == b.version
}

func (t *meshTable) logChange(typ Type, gen uint64, name string) {
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

// wake tells every stream of the mesh that it changed. It never blocks.
func (t *meshTable) wake() {
	for s := range t.streams {
		s.poke()
	}
}

// version is the content hash of a marshaled resource: the same on every
// instance for the same resource.
func version(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
