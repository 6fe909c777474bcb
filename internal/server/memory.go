package server

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/meshnames/meshnames/internal/cache"
)

// Thresholds of returnMemoryWhenQuiet, per poll of a second.
const (
	quietPoll  = time.Second
	quietBytes = 8 << 20  // allocated in a quiet second: at most this
	busyBytes  = 64 << 20 // allocated in a busy second: at least this
	busyFreed  = 1000     // or resources frozen in a busy second
	// gcBusyBytes allocated in a second start a burst for the collector
	// (loadGC.setBusy): less than busyBytes, as a zone sharing its cores
	// with nine others receives its initial sync at 20-30 MB a second.
	gcBusyBytes = 16 << 20
	// quietPolls quiet seconds in a row end a burst, and returns are at
	// least returnEvery apart: a zone's first sync and a global's fan-out
	// come in batches with quiet seconds between them (10 processes on 2
	// cores), and a return after each cost 8-12% of the global's CPU.
	// A burst that comes back sooner than that after a return doubles the
	// least time to the next, up to maxReturnEvery (returnPacer).
	quietPolls     = 3
	returnEvery    = 10 * time.Second
	maxReturnEvery = 160 * time.Second
	// returnMinBytes allocated since the last return make a burst,
	// however small the live heap (returnPacer).
	returnMinBytes = 16 << 20
	// returnIdleBytes of free heap not yet returned to the system make a
	// burst in a quiet second (returnPacer).
	returnIdleBytes = 4 << 20
	// loadLimit ends the eager collection of the load at the latest.
	loadLimit = 5 * time.Minute
	// eagerMin is the size of a store below which the load is too small
	// to need eager collection: a small heap spreads over few spans
	// anyway, and collecting four times as often during the writes that
	// follow a start would cost a third of their CPU.
	eagerMin = 10_000
)

// loadGCPercent is the garbage collector's target (GOGC) while a control
// plane loads its store, unless GOGC is set. The load (100,000 services:
// every resource decoded, the echoes of the controllers' first writes,
// then the cache's freeze) is mostly garbage around the state that stays;
// with the default of 100 the heap peaks at several times that state,
// which spreads it over many spans that stay half empty once the garbage
// is gone. Collecting more often while loading halves the peak and the
// spans the state ends up in, for a few seconds of extra CPU once.
const loadGCPercent = 25

// firstPassGCPercent is the target during the controllers' first pass of
// the load, at least (see loadGC).
const firstPassGCPercent = 200

// busyGCPercent is the target, at least, while the control plane is busy
// (see loadGC).
const busyGCPercent = 200

// loadGC holds the garbage collector's target through a start: eager
// (loadGCPercent) while the store loads, except during the controllers'
// first pass, which runs at firstPassGCPercent (or the target the process
// started with, if higher). At a first start that pass writes every
// service's status (about 20 KiB of allocation per service, nearly all
// garbage at once), and collecting four times as often cost 6 of the 16 s
// it took to name 100,000 services; the state it leaves in the heap is
// small next to that. Collecting at half the default rate again saved 7%
// of that naming (about 0.35 s at 100,000), for a higher transient peak
// (the heap's goal three times the live heap, about 850 MiB at 100,000
// against 600) and about 60 bytes more RSS per service once the first
// start settles; a restart's first pass writes nothing and allocates
// little either way (initial-naming-s of BenchmarkPutToHostname at
// 100,000, and BenchmarkIdle). Nothing changes when the operator set GOGC.
//
// In a federation (a global or a zone) the load is the control plane's
// own store only: it ends once the cache has listed it (listed). What
// follows is the federation's state arriving over the sync streams, for
// minutes at 10 zones of 10,000 services, and collecting eagerly all that
// time cost a zone a quarter of its CPU (BenchmarkMultizone,
// zones-cpu-s-at-sync, at 10 x 10,000).
//
// Outside the eager collection, the target keeps the heap's goal at
// least heapFloor above what the last collection left live (raised with
// the live heap by afterGC): a small control plane taking writes (an
// empty store filling at thousands of services a second) would otherwise
// collect a heap of 10-30 MB every few dozen milliseconds, a tenth of
// its CPU. A large store's live heap keeps the start's target, so its
// memory is unchanged.
//
// After the load, while the control plane is busy (returnMemoryWhenQuiet
// saw a second allocating busyBytes, until the quiet that ends the burst),
// the target is busyGCPercent at least: writes to a large store (rest-load
// with 100,000 services stored, a zone's initial sync) spent a third of
// their CPU collecting a heap of a few hundred megabytes, for garbage
// that is nearly all of what they allocate. The heap may grow to three
// times the live one during the burst instead of twice; its end returns
// the garbage to the system as before.
type loadGC struct {
	mu        sync.Mutex
	managed   bool          // GOGC is not set
	federated bool          // a global or a zone
	loading   bool          // the load is not over (end)
	passes    int           // first passes running
	namings   int           // first namings of Kubernetes Services running (kubeFirstPass)
	tail      time.Duration // kubeNamingTail (tests shorten it)
	busy      bool          // a burst of work after the load (setBusy)
	prev      int           // the target outside the load, without the floor
	current   int           // the target last set
	// live reads what the last collection left live, which the runtime
	// sets the heap's goal from (liveHeap).
	live func() uint64
}

// heapFloor is how far above the live heap the collector's goal stays at
// least, outside the eager collection of the load.
const heapFloor = 64 << 20

// newLoadGC starts the eager collection of the load; federated says the
// control plane is a global or a zone.
func newLoadGC(federated bool) *loadGC {
	_, set := os.LookupEnv("GOGC")
	g := &loadGC{managed: !set, federated: federated, loading: true, live: liveHeap, tail: kubeNamingTail}
	if g.managed {
		g.prev = debug.SetGCPercent(loadGCPercent)
		g.current = loadGCPercent
	}
	return g
}

// target is the collector's target for the current phase; g.mu is held.
func (g *loadGC) target() int {
	switch {
	case g.namings > 0:
		return loadGCPercent
	case g.loading && g.passes == 0:
		return loadGCPercent
	case g.loading:
		return floorPercent(max(g.prev, firstPassGCPercent), g.live())
	case g.busy && g.prev >= 0:
		return floorPercent(max(g.prev, busyGCPercent), g.live())
	}
	return floorPercent(g.prev, g.live())
}

// setBusy reports the start or the end of a burst of work.
func (g *loadGC) setBusy(busy bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = busy
	g.set()
}

// floorPercent is the target percent, or more where the live heap is so
// small that percent would set the goal less than heapFloor above it. A
// negative percent (collection off) stays.
func floorPercent(percent int, live uint64) int {
	if percent < 0 || live == 0 {
		return percent
	}
	return max(percent, int(min(uint64(heapFloor)*100/live, 100_000)))
}

// set applies the target of the current phase; g.mu is held.
func (g *loadGC) set() {
	if !g.managed {
		return
	}
	if t := g.target(); t != g.current {
		g.current = t
		debug.SetGCPercent(t)
	}
}

// liveHeap returns the heap the last collection marked live; 0 before
// the first.
func liveHeap() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// afterGC sets the target again over the heap a collection left live,
// for the floor. Every change of phase reads the live heap afresh too: a
// target set over a live heap since outgrown would let the heap grow
// tens of times over (a first pass starting over the live heap of an
// early collection of the load).
func (g *loadGC) afterGC() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.set()
}

// watchGC calls g.afterGC after every collection until ctx ends (a
// finalizer that sets itself again: the runtime runs it after the
// collection that found its object unreachable).
func (g *loadGC) watchGC(ctx context.Context) {
	if !g.managed {
		return
	}
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
			if ctx.Err() != nil {
				return
			}
			g.afterGC()
			arm()
		})
	}
	arm()
}

// gcSentinel is the object of watchGC's finalizer; not empty, as every
// zero-sized allocation has the same address and is never collected.
type gcSentinel struct{ _ byte }

// end ends the eager collection for good.
func (g *loadGC) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.loading {
		g.loading = false
		g.set()
	}
}

// listed reports that the cache has listed the store, n resources: the
// load is over for a small store (eagerMin) and in a federation.
func (g *loadGC) listed(n int) {
	if n < eagerMin || g.federated {
		g.end()
	}
}

// firstPass suspends the eager collection until the returned function is
// called (reconcile.Options.FirstPass).
func (g *loadGC) firstPass() (done func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.passes++
	g.set()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.passes--
			g.set()
		})
	}
}

// kubeEagerMin is the least number of Services whose first naming
// kubeFirstPass collects eagerly.
const kubeEagerMin = 1000

// kubeNamingTail is how long the eager collection of a first naming
// outlasts the Service controller's writes: the status writes of its last
// batch follow them, and the cache freezes what they named FreezeAfter
// later (its passes FreezeAfter/3 apart).
const kubeNamingTail = cache.FreezeAfter + cache.FreezeAfter/2

// kubeFirstPass collects garbage eagerly (loadGCPercent) when the Service
// controller of Kubernetes mode starts with at least kubeEagerMin Services
// (kubeservices.Options.FirstPass), until kubeNamingTail after the
// returned function is called. A first start there names every Service at
// the API server's write rate, allocating a few hundred kilobytes per
// Service around the little each keeps; collected at the default rate,
// that garbage scatters what stays over far more spans than it needs
// (unused heap 10.8 MiB beside 19.7 MiB live at 3,000 Services; 8.9 MiB
// collected eagerly until the controller's writes end, 6.7 MiB collected
// eagerly throughout: BenchmarkKubeLiveHeap). The price is CPU: on two
// cores shared with the API server the collections are about a quarter of
// meshnames' CPU in a first naming of 10,000 (18-25 CPU-s beside the API
// server's 90-124), which the API server's writes wait for; collected at
// the default rate, an earlier build settled at 4,215 B of RSS per Service
// instead of 3,600-4,000 (docs/performance.md).
func (g *loadGC) kubeFirstPass(services int) (done func()) {
	if services < kubeEagerMin {
		return func() {}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.namings++
	g.set()
	var once sync.Once
	return func() {
		once.Do(func() {
			time.AfterFunc(g.tail, func() {
				g.mu.Lock()
				defer g.mu.Unlock()
				g.namings--
				g.set()
			})
		})
	}
}

// returnPacer decides, one poll of a second at a time, when
// returnMemoryWhenQuiet returns memory: after quietPolls quiet seconds in
// a row (under quietBytes allocated, nothing freed) that follow a busy
// one (over busyBytes allocated, or at least busyFreed resources freed;
// or the second in which what was allocated since the last return
// exceeded both the live heap and returnMinBytes, or what was frozen
// reached busyFreed), and every since the last return. Slow work adds up:
// a Kubernetes control plane names its Services at the API server's write
// rate (about 2 GB over a minute for 3,000, never busyBytes in a second),
// the cache freezes them in passes ten seconds apart, each under
// busyFreed, and a start allocates tens of MB over seconds; without a
// return their garbage stays in the RSS, up to heapFloor of it. An idle
// control plane's trickle of allocation makes a return once it adds up to
// an eighth of its live heap (and returnIdleBytes) by a quiet second (see
// poll), which keeps the return's collection in proportion to the
// allocation. every starts at returnEvery; a burst
// that starts less than every after a return shows that return was
// wasted (the heap grew straight back, each page faulted in again) and
// doubles it, up to maxReturnEvery, and a burst that starts later sets it
// back. A zone's initial sync at 10 zones of 10,000 services is minutes
// of such bursts with quiet seconds between them, and on a machine where
// page faults and madvise are dear (a Firecracker VM) one or two returns
// during it were a tenth of the zone's and the global's CPU in madvise
// alone, 1-2 s each (CPU profiles of BenchmarkMultizone at 10 x 10,000).
type returnPacer struct {
	busy, burstSeen bool
	quiet           int
	last            time.Time // the last return; zero before the first
	every           time.Duration
	// work and freed sum what was allocated and freed since the last
	// return.
	work, freed uint64
}

// poll takes what the second that ended at now allocated (d bytes) and
// freed (f resources), the live heap and the idle heap (free, not yet
// returned), and reports whether to return memory now; the caller then
// calls returned.
//
// A quiet second starts a burst too when the idle heap reaches
// returnIdleBytes, or what was allocated since the last return an eighth
// of the live heap (and returnIdleBytes): the heap's goal stays heapFloor
// above the live heap, and the runtime's own scavenger keeps what is
// under the goal, so the garbage of work too small to make a burst by
// itself (a Kubernetes-mode process's watches and Lease after its first
// naming's last return: 9-12 MiB of idle heap, or as much uncollected, in
// runs of BenchmarkKube at 10,000, 1,000 B per Service) would otherwise
// stay in the RSS. An eighth of the live heap keeps the cost of those
// returns (a collection of the live heap each) in proportion to what
// the process allocates, and the pacing bounds how often they come.
func (p *returnPacer) poll(now time.Time, d, f, live, idle uint64) bool {
	if p.every == 0 {
		p.every = returnEvery
	}
	// What was allocated since the last return, quiet seconds included,
	// makes a burst once it exceeds the live heap (a return costs a
	// collection of it) and returnMinBytes; so do busyFreed resources
	// frozen since.
	limit := max(live, returnMinBytes)
	crossed := p.work < limit && p.work+d >= limit || p.freed < busyFreed && p.freed+f >= busyFreed
	p.work, p.freed = p.work+d, p.freed+f
	switch {
	case d >= busyBytes || f >= busyFreed || crossed ||
		!p.busy && d < quietBytes && f == 0 && (idle >= returnIdleBytes || p.work >= max(live/8, returnIdleBytes)):
		if !p.burstSeen && !p.last.IsZero() {
			p.burstSeen = true
			if now.Sub(p.last) < p.every {
				p.every = min(2*p.every, maxReturnEvery)
			} else {
				p.every = returnEvery
			}
		}
		p.busy, p.quiet = true, 0
	case d >= quietBytes || f > 0:
		p.quiet = 0
	case p.busy:
		p.quiet++
	}
	return p.busy && p.quiet >= quietPolls && (p.last.IsZero() || now.Sub(p.last) >= p.every)
}

// returned records a return at now.
func (p *returnPacer) returned(now time.Time) {
	p.busy, p.burstSeen, p.quiet, p.last, p.work, p.freed = false, false, 0, now, 0, 0
}

// returnMemoryWhenQuiet gives the heap's garbage back to the operating
// system once a burst of work is over. Loading a large store (100,000
// services: the cache's first list, every controller's first pass, the
// DNS table, the echoes of the first status writes) leaves most of the
// heap as garbage, which the runtime would otherwise keep as idle heap and
// return only minutes later, or never while the heap stays near its goal.
// The cache freezing what stopped changing (30 s after such a burst) frees
// as much again while allocating little.
//
// It watches the allocation counter and freed, a count of resources whose
// decoded form was dropped, and calls debug.FreeOSMemory (a full
// collection and a madvise of the idle heap: from a few hundred
// milliseconds to 2 s of CPU with 100,000 services) when returnPacer says
// so. Steady traffic (DNS queries, the odd write)
// has no busy second, so it never triggers one.
//
// It also ends the eager collection of the load (gc): at that
// return once the cache has frozen resources (past its bound
// on decoded ones during the load, or 30 s after it), or after loadLimit.
//
// loaded reports whether the cache has listed the store, and how many
// resources it holds (loadGC.listed).
//
// flush, when not nil, is called first: the store writes out what it holds
// in memory for recent writes (store.MemoryFlusher). done is called after
// each return, and pending after every poll with whether a burst awaits
// its return (metrics: a return that waits for returnPacer's interval
// comes at the first quiet second after it, which a benchmark that times
// a settled process must wait for).
func returnMemoryWhenQuiet(ctx context.Context, log *slog.Logger, gc *loadGC, freed func() uint64, loaded func() (bool, int), flush func() error, done func(), pending func(bool)) {
	defer gc.end()
	loadDone := time.After(loadLimit)
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	idle := func() uint64 { return sample[1].Value.Uint64() } // as of the last read
	t := time.NewTicker(quietPoll)
	defer t.Stop()
	prev, prevFreed, gcQuiet := read(), freed(), 0
	// A start is a burst of work: its garbage (tens of MB even without a
	// resource: the API client, the watches' first lists, the templates)
	// would otherwise stay in the RSS of an idle control plane, up to
	// heapFloor of it, until enough other work came.
	pacer := returnPacer{busy: true}
	for {
		select {
		case <-ctx.Done():
			return
		case <-loadDone:
			gc.end()
			continue
		case <-t.C:
		}
		if synced, n := loaded(); synced {
			gc.listed(n)
		}
		now, nowFreed := read(), freed()
		d, f := now-prev, nowFreed-prevFreed
		switch { // the collector's bursts: by allocation alone
		case d >= gcBusyBytes:
			gc.setBusy(true)
			gcQuiet = 0
		case d < quietBytes:
			if gcQuiet++; gcQuiet >= quietPolls {
				gc.setBusy(false)
			}
		default:
			gcQuiet = 0
		}
		if pacer.poll(time.Now(), d, f, gc.live(), idle()) {
			if nowFreed > 0 {
				gc.end() // the load is over: the cache froze what it left
			}
			start := time.Now()
			if flush != nil {
				if err := flush(); err != nil {
					log.Warn("cannot flush the store's memtable", "err", err)
				}
			}
			debug.FreeOSMemory()
			log.Debug("returned idle memory to the OS after a burst of work", "dur", time.Since(start), "next-after", pacer.every)
			pacer.returned(time.Now())
			done()
			now = read()
		}
		pending(pacer.busy)
		prev, prevFreed = now, nowFreed
	}
}
