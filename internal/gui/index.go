package gui

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// serviceKinds are the kinds that have hostnames and VIPs, in the order the
// GUI lists them.
var serviceKinds = []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService}

// index finds services by what their status says without decoding every
// resource of the cache, which costs seconds at 100,000 services.
//
// A service whose hostnames are all Available and which has a VIP is
// found through the DNS table (Options.MatchDNS, Lookup, LookupAddr),
// which holds every name it answers and every VIP. The index keeps the
// others, which the table cannot show: the services with a hostname that
// is NotAvailable, and those with hostnames but no VIP (a
// MeshExternalService without InternalVIP matches has none). A healthy
// mesh has few, so the index costs next to nothing; it follows the cache's
// changes from the start (Server.Run), reading each changed service while
// the cache still holds it decoded.
type index struct {
	c *cache.Cache

	mu      sync.Mutex
	active  bool
	digests map[resource.Key]digest // the services off the DNS table
	rev     int64                   // the cache revision the digests reflect
	cancel  func()

	// pending are the keys the cache reported changed since the last
	// drain, and pendingRev the cache revision once they were reported.
	pmu        sync.Mutex
	pending    []resource.Key
	pendingRev int64
	// wake tells run that keys are pending.
	wake chan struct{}
}

// digest is what the index keeps of one service.
type digest struct {
	addrs []addrDigest
	vips  []string
}

type addrDigest struct {
	hostname  string
	generator string // empty for InternalVIP values
	available bool
	reason    string // kept only when not available
}

func newIndex(c *cache.Cache) *index {
	return &index{c: c, wake: make(chan struct{}, 1)}
}

// digestOf returns what the index keeps of o, and false when the DNS table
// shows all of it: every hostname Available, and a VIP to answer them with
// (or neither hostnames nor VIPs).
func digestOf(o *resource.Object) (digest, bool) {
	st, ok := o.Status.(resource.ServiceStatusOf)
	if !ok || st == nil {
		return digest{}, false
	}
	s := st.Service()
	if s == nil {
		return digest{}, false
	}
	available := 0
	for _, a := range s.Addresses {
		if a.Status == resource.AddressAvailable {
			available++
		}
	}
	switch {
	case available < len(s.Addresses): // a name not available
	case len(s.Addresses) > 0 && len(s.VIPs) == 0: // names, no VIP
	case len(s.Addresses) == 0 && len(s.VIPs) > 0: // a VIP, no name to find it by
	default:
		return digest{}, false
	}
	var d digest
	if len(s.Addresses) > 0 {
		d.addrs = make([]addrDigest, len(s.Addresses))
		for i, a := range s.Addresses {
			ad := addrDigest{hostname: a.Hostname, available: a.Status == resource.AddressAvailable}
			if a.Origin.Kind == resource.OriginHostnameGenerator {
				ad.generator = a.Origin.Name
			}
			if !ad.available {
				ad.reason = a.Reason
			}
			d.addrs[i] = ad
		}
	}
	if len(s.VIPs) > 0 {
		d.vips = make([]string, len(s.VIPs))
		for i, v := range s.VIPs {
			d.vips[i] = v.IP
		}
	}
	return d, true
}

// read runs fn over the digests, current to the revision it returns: it
// builds the index when it is not active (Run builds it at start), and
// applies the changes reported since the last read. fn must not keep the
// map.
func (ix *index) read(fn func(map[resource.Key]digest)) int64 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !ix.active {
		ix.activate()
	}
	ix.drainLocked()
	fn(ix.digests)
	return ix.rev
}

// activate subscribes to the cache and reads every service once. ix.mu is
// held.
func (ix *index) activate() {
	ix.cancel = ix.c.Subscribe(func(keys []resource.Key) {
		rev := ix.c.Revision() // the cache tells one batch at a time, on its goroutine
		ix.pmu.Lock()
		for _, k := range keys {
			if slices.Contains(serviceKinds, k.Kind) {
				ix.pending = append(ix.pending, k)
			}
		}
		ix.pendingRev = rev
		ix.pmu.Unlock()
		select {
		case ix.wake <- struct{}{}:
		default:
		}
	})
	// Changes after this revision are reported to the subscription, which
	// was made first; reading them again is harmless.
	ix.rev = ix.c.Revision()
	ix.digests = map[resource.Key]digest{}
	for _, k := range serviceKinds {
		ix.c.Scan(cache.Query{Kind: k}, func(o *resource.Object) {
			if d, ok := digestOf(o); ok {
				ix.digests[o.Key()] = d
			}
		})
	}
	ix.active = true
}

// drain applies the pending changes.
func (ix *index) drain() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.active {
		ix.drainLocked()
	}
}

func (ix *index) drainLocked() {
	ix.pmu.Lock()
	keys, rev := ix.pending, ix.pendingRev
	ix.pending = nil
	ix.pmu.Unlock()
	for _, k := range keys {
		o, ok := ix.c.Peek(k) // read only
		var d digest
		if ok {
			d, ok = digestOf(o)
		}
		if ok {
			ix.digests[k] = d
		} else {
			delete(ix.digests, k)
		}
	}
	ix.rev = max(ix.rev, rev)
}

func (ix *index) deactivate() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !ix.active {
		return
	}
	ix.cancel()
	ix.active, ix.digests, ix.cancel = false, nil, nil
	ix.pmu.Lock()
	ix.pending = nil
	ix.pmu.Unlock()
}

// run builds the index and keeps it current until ctx ends.
func (ix *index) run(ctx context.Context) {
	defer ix.deactivate()
	ix.read(func(map[resource.Key]digest) {})
	for {
		select {
		case <-ctx.Done():
			return
		case <-ix.wake:
			ix.drain()
		}
	}
}

// query is a parsed search of the services list: every term must match.
// A term KEY=VALUE is a label; any other term matches a part of the
// service's name, of one of its hostnames or DNS names, or of one of its
// VIPs.
type query struct {
	labels map[string]string
	words  []string
}

func parseQuery(q string) query {
	var out query
	for _, t := range strings.Fields(q) {
		if k, v, ok := strings.Cut(t, "="); ok && k != "" {
			if out.labels == nil {
				out.labels = map[string]string{}
			}
			out.labels[k] = v
			continue
		}
		out.words = append(out.words, strings.ToLower(t))
	}
	return out
}

func (q query) empty() bool { return len(q.labels) == 0 && len(q.words) == 0 }

// digestMatches reports whether one of d's hostnames or VIPs contains w.
func digestMatches(w string, d digest) bool {
	for _, a := range d.addrs {
		if strings.Contains(a.hostname, w) {
			return true
		}
	}
	for _, v := range d.vips {
		if strings.Contains(v, w) {
			return true
		}
	}
	return false
}

// matcher finds the services a word matches in the DNS table.
type matcher func(word string, fn func(resource.Key))

// search returns the page [offset, offset+size) of the services of kinds
// in mesh (every mesh when empty) that q selects, ordered by kind, mesh
// and name, with how many it selects in all and the revision it reflects.
func (ix *index) search(kinds []resource.Kind, mesh string, q query, dns matcher, offset, size int) (page []resource.Key, total int, rev int64) {
	// The keys are read before the digests: a service created in between
	// is left out, as it would be a moment earlier.
	var keys []resource.Key
	for _, k := range kinds {
		keys = append(keys, ix.c.Keys(cache.Query{Kind: k, Mesh: mesh, Labels: q.labels})...)
	}
	// For each word, the services the DNS table finds it in; none is
	// needed when every candidate's name has the word.
	inDNS := make([]map[resource.Key]bool, len(q.words))
	for i, w := range q.words {
		if dns == nil || !slices.ContainsFunc(keys, func(k resource.Key) bool { return !strings.Contains(k.Name, w) }) {
			continue
		}
		inDNS[i] = map[resource.Key]bool{}
		dns(w, func(k resource.Key) { inDNS[i][k] = true })
	}
	rev = ix.read(func(ds map[resource.Key]digest) {
		for _, k := range keys {
			ok := true
			for i, w := range q.words {
				if strings.Contains(k.Name, w) || inDNS[i][k] {
					continue
				}
				if d, off := ds[k]; off && digestMatches(w, d) {
					continue
				}
				ok = false
				break
			}
			if !ok {
				continue
			}
			if total >= offset && len(page) < size {
				page = append(page, k)
			}
			total++
		}
	})
	return page, total, rev
}

// claim is one service's address for a hostname.
type claim struct {
	Key       resource.Key
	Hostname  string
	Generator string
	Available bool
	Reason    string
}

// offTable returns the addresses with the hostname (lower case, without a
// trailing dot) of the services the index keeps: those that lost it, and
// those that hold it without a VIP.
func (ix *index) offTable(name string) []claim {
	var out []claim
	ix.read(func(ds map[resource.Key]digest) {
		for k, d := range ds {
			for _, a := range d.addrs {
				if a.hostname == name {
					out = append(out, claim{Key: k, Hostname: a.hostname, Generator: a.generator, Available: a.available, Reason: a.reason})
				}
			}
		}
	})
	slices.SortFunc(out, compareClaims)
	return out
}

// byVIP returns the services the index keeps that have ip in status.vips.
func (ix *index) byVIP(ip netip.Addr) []resource.Key {
	s := ip.String()
	var out []resource.Key
	ix.read(func(ds map[resource.Key]digest) {
		for k, d := range ds {
			if slices.Contains(d.vips, s) {
				out = append(out, k)
			}
		}
	})
	return out
}

// heldOffTable returns, for each hostname of names wanted in mesh, a
// service the index keeps that holds it (one without a VIP).
func (ix *index) heldOffTable(mesh string, names map[string]bool) map[string]resource.Key {
	out := map[string]resource.Key{}
	ix.read(func(ds map[resource.Key]digest) {
		for k, d := range ds {
			if k.Mesh != mesh {
				continue
			}
			for _, a := range d.addrs {
				if a.available && names[a.hostname] {
					out[a.hostname] = k
				}
			}
		}
	})
	return out
}

// lostNames are the addresses not available: of every generator (total
// and at most limit of them, ordered by mesh, hostname and service), and
// of each generator (lostBy, at most limit each, and lostCount).
type lostNames struct {
	all       []claim
	total     int
	lostBy    map[string][]claim
	lostCount map[string]int
	rev       int64
}

func (ix *index) lost(limit int) lostNames {
	l := lostNames{lostBy: map[string][]claim{}, lostCount: map[string]int{}}
	l.rev = ix.read(func(ds map[resource.Key]digest) {
		for k, d := range ds {
			for _, a := range d.addrs {
				if a.available {
					continue
				}
				c := claim{Key: k, Hostname: a.hostname, Generator: a.generator, Reason: a.reason}
				l.total++
				l.all = append(l.all, c)
				if a.generator != "" {
					l.lostCount[a.generator]++
					l.lostBy[a.generator] = append(l.lostBy[a.generator], c)
				}
			}
		}
	})
	first := func(cs []claim) []claim {
		slices.SortFunc(cs, func(a, b claim) int {
			if c := strings.Compare(a.Key.Mesh, b.Key.Mesh); c != 0 {
				return c
			}
			if c := strings.Compare(a.Hostname, b.Hostname); c != 0 {
				return c
			}
			return compareKeys(a.Key, b.Key)
		})
		return cs[:min(len(cs), limit)]
	}
	l.all = first(l.all)
	for g, cs := range l.lostBy {
		l.lostBy[g] = first(cs)
	}
	return l
}

// matching returns the services the index keeps whose hostnames or VIPs
// contain w.
func (ix *index) matching(w string) []resource.Key {
	var out []resource.Key
	ix.read(func(ds map[resource.Key]digest) {
		for k, d := range ds {
			if digestMatches(w, d) {
				out = append(out, k)
			}
		}
	})
	return out
}

// size returns how many services the index keeps (tests).
func (ix *index) size() int {
	n := 0
	ix.read(func(ds map[resource.Key]digest) { n = len(ds) })
	return n
}

func kindRank(k resource.Kind) int {
	if i := slices.Index(serviceKinds, k); i >= 0 {
		return i
	}
	return len(serviceKinds)
}

func compareKeys(a, b resource.Key) int {
	if c := kindRank(a.Kind) - kindRank(b.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Mesh, b.Mesh); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func compareClaims(a, b claim) int {
	if a.Available != b.Available {
		if a.Available {
			return -1
		}
		return 1
	}
	return compareKeys(a.Key, b.Key)
}
