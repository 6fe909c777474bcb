package hostname

import (
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
)

// claimList is the claims index entry of one hostname in one mesh. There
// is one per name, so it is kept to 64 bytes: it does not point back to
// its index (an operation that touches it knows the index).
type claimList struct {
	host string
	// claims are ordered by priority; the first holds the name.
	claims []claim
	// one backs claims while there is a single claimant, the common case,
	// so that a name costs one allocation.
	one [1]claim
	// touched is set while the list is in Engine.touched.
	touched bool
}

type claim struct {
	gen *genState
	svc *svcState
}

// String describes the claim for reasons: the service, and how it claims.
func (c claim) String() string {
	k := c.svc.key
	switch c.gen.src {
	case InternalVIP:
		return fmt.Sprintf("%s %s/%s (its InternalVIP match)", k.Kind, k.Mesh, k.Name)
	case ServiceTag:
		return fmt.Sprintf("%s %s/%s (its service tag)", k.Kind, k.Mesh, k.Name)
	case ServiceTagAlias:
		return fmt.Sprintf("%s %s/%s (an alias of its service tag)", k.Kind, k.Mesh, k.Name)
	}
	return fmt.Sprintf("%s %s/%s (from generator %s)", k.Kind, k.Mesh, k.Name, c.gen.Name)
}

func (c claim) before(o claim) bool {
	if c.gen != o.gen {
		return c.gen.before(o.gen)
	}
	return c.svc.before(o.svc)
}

// since is when the claim came to be: the creation of its service, or of
// its generator when that is newer.
func (c claim) since() (sec int64, nsec int32) {
	sec, nsec = c.svc.sec, c.svc.nsec
	if c.gen.src == Generated {
		gs, gn := c.gen.Created.Unix(), int32(c.gen.Created.Nanosecond())
		if gs > sec || gs == sec && gn > nsec {
			return gs, gn
		}
	}
	return sec, nsec
}

// holder returns the index of the claim that holds l's name. InternalVIP
// values and generated names compete by age, so that a name held never
// moves to a newer claim because a resource was written: the first
// InternalVIP claim and the first generated claim (each list in its own
// precedence: the older service; seed 000's order of generators) meet, and
// the one that came to be first holds the name (the InternalVIP one on a
// tie). Service-tag names and aliases, listed after both, hold a name
// only when no other claim does.
func (l *claimList) holder() int {
	if l.claims[0].gen.src != InternalVIP {
		return 0
	}
	g := slices.IndexFunc(l.claims, func(c claim) bool { return c.gen.src == Generated })
	if g < 0 {
		return 0
	}
	os, on := l.claims[0].since()
	gs, gn := l.claims[g].since()
	if gs < os || gs == os && gn < on {
		return g
	}
	return 0
}

// others returns the claims of l other than its holder's, in order.
func (l *claimList) others() []claim {
	h := l.holder()
	if h == 0 {
		return l.claims[1:]
	}
	return slices.Concat(l.claims[:h], l.claims[h+1:])
}

// meshNames is the claims index of one mesh: hostname -> claimants, by a
// hash of the name (see hashIndex).
type meshNames = hashIndex[string, claimList]

func newMeshNames() *meshNames { return newHashIndex(func(l *claimList) string { return l.host }) }

// claim adds s's claim on host through g to names, the index of s's mesh,
// and returns the name's entry.
func (e *Engine) claim(names *meshNames, s *svcState, g *genState, host string) *claimList {
	h := e.hash(host)
	l := names.get(h, host)
	if l == nil {
		l = &claimList{host: host}
		l.claims = l.one[:0]
		names.add(h, l)
		e.names++
	}
	e.touch(l, names)
	c := claim{gen: g, svc: s}
	i := sort.Search(len(l.claims), func(i int) bool { return c.before(l.claims[i]) })
	l.claims = slices.Insert(l.claims, i, c)
	return l
}

// touch records that l, an entry of names, is about to change, with its
// holder before the change. Call it before changing l.claims.
func (e *Engine) touch(l *claimList, names *meshNames) {
	if !l.touched {
		l.touched = true
		t := touched{list: l, names: names}
		if len(l.claims) > 0 {
			t.holder = l.claims[l.holder()]
		}
		e.touched = append(e.touched, t)
	}
}

// settle ends an operation. For each name it touched whose holder changed
// it marks every claimant dirty (their reasons name the holder); claimants
// that joined or left were marked by update. It drops the names left
// without claimants: an emptied entry stays in the index until here, so
// that a name released and claimed again in one operation keeps it.
func (e *Engine) settle() {
	for _, t := range e.touched {
		l := t.list
		l.touched = false
		switch {
		case len(l.claims) == 0:
			t.names.remove(e.hash(l.host), l)
			e.names--
		case l.claims[l.holder()] != t.holder:
			for _, c := range l.claims {
				e.markDirty(c.svc)
			}
		default:
			// The holder's address names the other claimants.
			e.markDirty(l.claims[l.holder()].svc)
		}
	}
	clear(e.touched)
	e.touched = e.touched[:0]
}

func (e *Engine) hash(host string) uint64 {
	return maphash.String(e.seed, host) & e.hashMask
}

// Claimant is one service claiming a hostname.
type Claimant struct {
	Service   ServiceKey
	Generator string // empty but for a Generated name
	Source    Source
}

// Claimants returns who claims hostname in mesh, the holder first.
func (e *Engine) Claimants(mesh, hostname string) []Claimant {
	var list []claim
	if l := e.claims[mesh].get(e.hash(hostname), hostname); l != nil {
		list = append([]claim{l.claims[l.holder()]}, l.others()...)
	}
	out := make([]Claimant, len(list))
	for i, c := range list {
		out[i] = Claimant{Service: c.svc.key, Generator: c.gen.Name, Source: c.gen.src}
	}
	return out
}
