package gui

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// serviceKinds are the kinds that have hostnames and VIPs, in the order the
// GUI lists them.
var serviceKinds = []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService}

// index finds services by hostname, VIP and address status without
// decoding every resource of the cache: a digest of each service's
// status.addresses and status.vips. Pages render what they show from the
// cache itself; the index only says which services to show.
//
// It costs memory (a few hundred bytes per service), so it exists only
// while the GUI is used: the first request that needs it builds it from
// the cache and subscribes to the cache's changes, and it is dropped when
// no request has used it for idleAfter (Server.Run checks).
type index struct {
	c         *cache.Cache
	idleAfter time.Duration
	now       func() time.Time

	mu      sync.Mutex
	active  bool
	digests map[resource.Key]digest
	rev     int64 // the cache revision the digests reflect
	lastUse time.Time
	cancel  func()

	// pending are the keys the cache reported changed since the last
	// drain, and pendingRev the cache revision once they were reported.
	pmu        sync.Mutex
	pending    []resource.Key
	pendingRev int64
	// wake tells Server.Run that keys are pending or the index was built.
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

func newIndex(c *cache.Cache, idleAfter time.Duration, now func() time.Time) *index {
	return &index{c: c, idleAfter: idleAfter, now: now, wake: make(chan struct{}, 1)}
}

func digestOf(o *resource.Object) digest {
	st, ok := o.Status.(resource.ServiceStatusOf)
	if !ok || st == nil {
		return digest{}
	}
	s := st.Service()
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
	return d
}

// read runs fn over the digests, current to the revision it returns: it
// builds the index when it is not active, and applies the changes
// reported since the last read. fn must not keep the map.
func (ix *index) read(fn func(map[resource.Key]digest)) int64 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.lastUse = ix.now()
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
	n := 0
	for _, k := range serviceKinds {
		n += ix.c.Count(k, "")
	}
	ix.digests = make(map[resource.Key]digest, n)
	for _, k := range serviceKinds {
		ix.c.Scan(cache.Query{Kind: k}, func(o *resource.Object) {
			ix.digests[o.Key()] = digestOf(o)
		})
	}
	ix.active = true
	select {
	case ix.wake <- struct{}{}: // Run starts watching for idleness
	default:
	}
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
		if o, ok := ix.c.Peek(k); ok { // read only
			ix.digests[k] = digestOf(o)
		} else {
			delete(ix.digests, k)
		}
	}
	ix.rev = max(ix.rev, rev)
}

// expire drops the index when it has not been used for idleAfter, and
// tells when to look again (zero when it is not active).
func (ix *index) expire() time.Duration {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !ix.active {
		return 0
	}
	idle := ix.now().Sub(ix.lastUse)
	if idle < ix.idleAfter {
		return ix.idleAfter - idle
	}
	ix.deactivateLocked()
	return 0
}

func (ix *index) deactivate() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.active {
		ix.deactivateLocked()
	}
}

func (ix *index) deactivateLocked() {
	ix.cancel()
	ix.active, ix.digests, ix.cancel = false, nil, nil
	ix.pmu.Lock()
	ix.pending = nil
	ix.pmu.Unlock()
}

// isActive reports whether the index is built (tests).
func (ix *index) isActive() bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.active
}

// query is a parsed search of the services list: every term must match.
// A term KEY=VALUE is a label; any other term matches a part of the
// service's name, one of its hostnames or one of its VIPs.
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

// matches reports whether the service k, with digest d, has every word of
// q in its name, a hostname or a VIP (labels are matched by the cache).
func (q query) matches(k resource.Key, d digest) bool {
	for _, w := range q.words {
		if !wordMatches(w, k, d) {
			return false
		}
	}
	return true
}

func wordMatches(w string, k resource.Key, d digest) bool {
	if strings.Contains(k.Name, w) {
		return true
	}
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

// search returns the page [offset, offset+size) of the services of kinds
// in mesh (every mesh when empty) that q selects, ordered by kind, mesh
// and name, with how many it selects in all and the revision it reflects.
func (ix *index) search(kinds []resource.Kind, mesh string, q query, offset, size int) (page []resource.Key, total int, rev int64) {
	// The keys are read before the digests: a service created in between
	// has no digest yet and is left out, as it would be a moment earlier.
	var keys []resource.Key
	for _, k := range kinds {
		keys = append(keys, ix.c.Keys(cache.Query{Kind: k, Mesh: mesh, Labels: q.labels})...)
	}
	rev = ix.read(func(ds map[resource.Key]digest) {
		for _, k := range keys {
			d, ok := ds[k]
			if !ok || !q.matches(k, d) {
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

// claim is one service's address for a hostname, or its VIP.
type claim struct {
	Key       resource.Key
	Hostname  string
	Generator string
	Available bool
	Reason    string
}

// byHostname returns every service of any mesh that has the hostname
// (lower case, without a trailing dot) in status.addresses, holders first.
func (ix *index) byHostname(name string) []claim {
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

// byVIP returns the services that have ip in status.vips.
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
	slices.SortFunc(out, compareKeys)
	return out
}

// holders returns, for each hostname wanted in mesh, the service that
// holds it (Available).
func (ix *index) holders(mesh string, names map[string]bool) map[string]resource.Key {
	out := map[string]resource.Key{}
	if len(names) == 0 {
		return out
	}
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

// addressStats are the counts of the overview and the generators page.
type addressStats struct {
	// notAvailable are the addresses not held, ordered by mesh, hostname
	// and service; total counts them all, of which at most limit are kept.
	notAvailable []claim
	total        int
	// named counts, per generator, the services holding a name from it;
	// lost lists the names it rendered that are not held.
	named map[string]int
	lost  map[string][]claim
	rev   int64
}

// stats gathers addressStats, keeping at most limit not available
// addresses (and at most limit per generator).
func (ix *index) stats(limit int) addressStats {
	st := addressStats{named: map[string]int{}, lost: map[string][]claim{}}
	st.rev = ix.read(func(ds map[resource.Key]digest) {
		for k, d := range ds {
			for _, a := range d.addrs {
				if a.available {
					if a.generator != "" {
						st.named[a.generator]++
					}
					continue
				}
				c := claim{Key: k, Hostname: a.hostname, Generator: a.generator, Reason: a.reason}
				st.total++
				st.notAvailable = append(st.notAvailable, c)
				if a.generator != "" {
					st.lost[a.generator] = append(st.lost[a.generator], c)
				}
			}
		}
	})
	sortClaims := func(cs []claim) []claim {
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
	st.notAvailable = sortClaims(st.notAvailable)
	for g, cs := range st.lost {
		st.lost[g] = sortClaims(cs)
	}
	return st
}

// suggest returns up to limit services whose name, hostnames or VIPs
// contain w, for a search that matched nothing exactly.
func (ix *index) suggest(w string, limit int) []resource.Key {
	var out []resource.Key
	ix.read(func(ds map[resource.Key]digest) {
		for k, d := range ds {
			if wordMatches(w, k, d) {
				out = append(out, k)
			}
		}
	})
	slices.SortFunc(out, compareKeys)
	return out[:min(len(out), limit)]
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

// run keeps the index current between requests and drops it when idle.
func (ix *index) run(ctx context.Context) {
	var timer *time.Timer
	var expiry <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		ix.deactivate()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ix.wake:
			ix.drain()
		case <-expiry:
			expiry = nil
		}
		if expiry == nil {
			if next := ix.expire(); next > 0 {
				timer = time.NewTimer(next)
				expiry = timer.C
			}
		}
	}
}
