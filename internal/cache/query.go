package cache

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
)

// Query selects resources for List.
type Query struct {
	Kind resource.Kind
	// Mesh limits a mesh-scoped kind to one mesh; empty means every mesh.
	Mesh string
	// Labels must all be present with equal values.
	Labels map[string]string
	// NameContains, when set, selects only names that contain it (Kuma's
	// ?name= list filter).
	NameContains string
	Offset       int
	// Size is the page size; 0 means no limit.
	Size int
	// Unordered lets Scan and Keys give the resources in no particular
	// order, for a reader that does not need it (an order-free sum, such
	// as a sync inventory): a name list changed since the last ordered
	// read is not sorted again, and readers do not hold writers back.
	Unordered bool
}

// List returns a page of the resources q selects, ordered by mesh and name,
// and how many resources q selects in all.
func (c *Cache) List(q Query) (items []*resource.Object, total int) {
	page, total := c.page(q)
	items = make([]*resource.Object, 0, len(page))
	for _, it := range page {
		items = append(items, it.e.clone(it.k))
	}
	return items, total
}

// Page returns the page of resources q selects, to be encoded
// (Page.AppendJSON), and how many resources q selects in all.
func (c *Cache) Page(q Query) (p Page, total int) {
	items, total := c.page(q)
	return Page{c: c, items: items}, total
}

// A Page is a page of resources as List selects them, which only encodes
// them: it spares the API's list the copies and decoding of List.
type Page struct {
	c     *Cache
	items []pageItem
}

// Len returns how many resources p holds.
func (p Page) Len() int { return len(p.items) }

// AppendJSON appends to b the documents of p's resources, separated by
// commas: what List's items encode to (resource.Object.AppendJSON),
// written from the cache's own entries, frozen ones without decoding
// them.
func (p Page) AppendJSON(b []byte) (_ []byte, err error) {
	for i, it := range p.items {
		if i > 0 {
			b = append(b, ',')
		}
		p.c.guards.check(it.e.hot, false)
		if b, err = it.e.appendJSON(b, it.k); err != nil {
			return nil, fmt.Errorf("encode %s: %w", it.k, err)
		}
		p.c.guards.check(it.e.hot, false)
	}
	return b, nil
}

// pageItem is an entry of a page with its key.
type pageItem struct {
	k resource.Key
	e entry
}

// page returns the entries of the page q selects and how many resources q
// selects in all.
func (c *Cache) page(q Query) (items []pageItem, total int) {
	c.mu.Lock() // sorted name lists may be rebuilt
	defer c.mu.Unlock()
	for _, g := range c.groupsOf(q) {
		names := c.sortedNames(g)
		if len(q.Labels) == 0 && q.NameContains == "" {
			// Without a filter every name counts: skip to the page rather
			// than walk the names before it (paging through 100,000 was
			// quadratic).
			skip := min(max(q.Offset-total, 0), len(names))
			total += skip
			names = names[skip:]
			if q.Size > 0 && len(items) >= q.Size {
				total += len(names)
				continue
			}
		}
		unfiltered := len(q.Labels) == 0 && q.NameContains == ""
		for i, name := range names {
			if unfiltered && q.Size > 0 && len(items) >= q.Size {
				// The page is full and every name counts: count the rest
				// rather than walk it.
				total += len(names) - i
				break
			}
			e := c.groups[g][name]
			if !strings.Contains(name, q.NameContains) || !matches(e, name, q.Labels) {
				continue
			}
			if total >= q.Offset && (q.Size == 0 || len(items) < q.Size) {
				items = append(items, pageItem{resource.Key{Kind: g.kind, Mesh: g.mesh, Name: name}, e})
			}
			total++
		}
	}
	return items, total
}

// Keys returns the keys of the resources q selects, ordered by mesh and
// name unless q.Unordered (Offset and Size are ignored). It copies no
// resource.
func (c *Cache) Keys(q Query) []resource.Key {
	var keys []resource.Key
	c.scan(q, func(g group, name string, _ entry) {
		keys = append(keys, resource.Key{Kind: g.kind, Mesh: g.mesh, Name: name})
	})
	return keys
}

// Scan calls fn with each resource q selects, ordered by mesh and name
// unless q.Unordered (Offset and Size are ignored), for reading only: fn
// must not modify the resource, which may be the cache's own. It spares
// the copies of List when a controller reads everything once (its first
// pass). fn runs without the cache's lock held.
func (c *Cache) Scan(q Query, fn func(*resource.Object)) {
	var items []pageItem
	var size func(int)
	if len(q.Labels) == 0 && q.NameContains == "" {
		size = func(n int) { items = make([]pageItem, 0, n) } // every entry
	}
	c.scanSized(q, size, func(g group, name string, e entry) {
		items = append(items, pageItem{resource.Key{Kind: g.kind, Mesh: g.mesh, Name: name}, e})
	})
	for _, it := range items {
		c.guards.check(it.e.hot, false)
		fn(it.e.shared(it.k))
		c.guards.check(it.e.hot, false)
	}
}

// scan calls fn, under the lock, with every entry q selects, in order.
func (c *Cache) scan(q Query, fn func(group, string, entry)) {
	c.scanSized(q, nil, fn)
}

// scanSized is scan that first tells size, when not nil, how many
// entries the groups q selects hold, which is what fn will be given when
// q selects by neither label nor name: a Scan of 100,000 services then
// collects them into one allocation.
func (c *Cache) scanSized(q Query, size func(int), fn func(group, string, entry)) {
	if q.Unordered {
		c.mu.RLock()
		defer c.mu.RUnlock()
	} else {
		c.mu.Lock() // sorted name lists may be rebuilt
		defer c.mu.Unlock()
	}
	groups := c.groupsOf(q)
	if size != nil {
		n := 0
		for _, g := range groups {
			n += len(c.groups[g])
		}
		size(n)
	}
	for _, g := range groups {
		if q.Unordered {
			for name, e := range c.groups[g] {
				if strings.Contains(name, q.NameContains) && matches(e, name, q.Labels) {
					fn(g, name, e)
				}
			}
			continue
		}
		for _, name := range c.sortedNames(g) {
			if e := c.groups[g][name]; strings.Contains(name, q.NameContains) && matches(e, name, q.Labels) {
				fn(g, name, e)
			}
		}
	}
}

// Count returns how many resources of kind k the mesh holds (every mesh
// when mesh is empty).
func (c *Cache) Count(k resource.Kind, mesh string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for g, m := range c.groups {
		if g.kind == k && (mesh == "" || g.mesh == mesh) {
			n += len(m)
		}
	}
	return n
}

func (c *Cache) groupsOf(q Query) []group {
	if q.Mesh != "" {
		return []group{{q.Kind, q.Mesh}}
	}
	var gs []group
	for g := range c.groups {
		if g.kind == q.Kind {
			gs = append(gs, g)
		}
	}
	slices.SortFunc(gs, func(a, b group) int { return cmp.Compare(a.mesh, b.mesh) })
	return gs
}

func (c *Cache) sortedNames(g group) []string {
	if s, ok := c.sorted[g]; ok {
		return s
	}
	m := c.groups[g]
	s := make([]string, 0, len(m))
	for n := range m {
		s = append(s, n)
	}
	slices.Sort(s)
	c.sorted[g] = s
	return s
}

func matches(e entry, name string, want map[string]string) bool {
	for k, v := range want {
		if got, ok := e.label(name, k); !ok || got != v {
			return false
		}
	}
	return true
}
