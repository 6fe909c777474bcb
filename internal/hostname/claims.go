package hostname

import (
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
)

// claimList is the claims index entry of one hostname in one mesh. There
// is one per name, so it is kept to 48 bytes: it does not point back to
// its index (an operation that touches it knows the index), and it holds
// a single claimant, the common case, in place, so that a name costs one
// allocation and no slice header.
type claimList struct {
	host string
	// one is the claim while there is one; more holds the claims while
	// there are two or more. claims reads either.
	one  [1]claim
	more *[]claim
	// touched is set while the list is in Engine.touched.
	touched bool
}

// claims returns the claims of l, ordered by priority; the first holds
// the name. The slice may be l's own storage: change it only through
// setClaims.
func (l *claimList) claims() []claim {
	switch {
	case l.more != nil:
		return *l.more
	case l.one[0].svc != nil:
		return l.one[:]
	}
	return l.one[:0]
}

// setClaims replaces the claims of l with cs, which may be l.claims()
// changed in place.
func (l *claimList) setClaims(cs []claim) {
	switch len(cs) {
	case 0:
		l.one[0], l.more = claim{}, nil
	case 1:
		l.one[0], l.more = cs[0], nil
	default:
		l.one[0] = claim{}
		if l.more == nil {
			l.more = new([]claim)
		}
		*l.more = cs
	}
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
	cs := l.claims()
	if cs[0].gen.src != InternalVIP {
		return 0
	}
	g := slices.IndexFunc(cs, func(c claim) bool { return c.gen.src == Generated })
	if g < 0 {
		return 0
	}
	os, on := cs[0].since()
	gs, gn := cs[g].since()
	if gs < os || gs == os && gn < on {
		return g
	}
	return 0
}

// others returns the claims of l other than its holder's, in order.
func (l *claimList) others() []claim {
	cs := l.claims()
	h := l.holder()
	if h == 0 {
		return cs[1:]
	}
	return slices.Concat(cs[:h], cs[h+1:])
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
		names.add(h, l)
		e.names++
	}
	e.touch(l, names)
	c := claim{gen: g, svc: s}
	cs := l.claims()
	i := sort.Search(len(cs), func(i int) bool { return c.before(cs[i]) })
	l.setClaims(slices.Insert(cs, i, c))
	return l
}

// touch records that l, an entry of names, is about to change, with its
// holder before the change. Call it before changing l's claims.
func (e *Engine) touch(l *claimList, names *meshNames) {
	if !l.touched {
		l.touched = true
		t := touched{list: l, names: names}
		if cs := l.claims(); len(cs) > 0 {
			t.holder = cs[l.holder()]
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
		cs := l.claims()
		switch {
		case len(cs) == 0:
			t.names.remove(e.hash(l.host), l)
			e.names--
		case cs[l.holder()] != t.holder:
			for _, c := range cs {
				e.markDirty(c.svc)
			}
		default:
			// The holder's address names the other claimants.
			e.markDirty(cs[l.holder()].svc)
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
		list = append([]claim{l.claims()[l.holder()]}, l.others()...)
	}
	out := make([]Claimant, len(list))
	for i, c := range list {
		out[i] = Claimant{Service: c.svc.key, Generator: c.gen.Name, Source: c.gen.src}
	}
	return out
}
