package server

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"
)

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestLoadGC_Phases(t *testing.T) {
	const started = 80
	managedGC(t, started)

	g := newLoadGC(false)
	noFloor(g)
	var dones []func()
	pass := func() { dones = append(dones, g.firstPass()) }
	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"the load starts eager", func() {}, loadGCPercent},
		{"a first pass runs at the first pass's target", pass, firstPassGCPercent},
		{"a second concurrent pass", pass, firstPassGCPercent},
		{"one pass ends (its done called twice), the other runs", func() { dones[0](); dones[0]() }, firstPassGCPercent},
		{"both ended: eager again", func() { dones[1]() }, loadGCPercent},
		{"the load ends", g.end, started},
		{"a first pass after the load changes nothing", pass, started},
		{"its end neither", func() { dones[2]() }, started},
		{"end again changes nothing", g.end, started},
	}
	for _, s := range steps {
		s.do()
		if got := gcPercent(); got != s.want {
			t.Fatalf("%s: GOGC %d, want %d", s.name, got, s.want)
		}
	}
}

func TestLoadGC_ListedEndsASmallOrFederatedLoad(t *testing.T) {
	const started = 80
	managedGC(t, started)
	for _, tc := range []struct {
		name      string
		federated bool
		n         int
		want      int
	}{
		{"a standalone store of eagerMin stays eager", false, eagerMin, loadGCPercent},
		{"a small standalone store ends the load", false, eagerMin - 1, started},
		{"a federated store ends the load whatever its size", true, 10 * eagerMin, started},
		{"a small federated store too", true, 1, started},
	} {
		g := newLoadGC(tc.federated)
		noFloor(g)
		g.listed(tc.n)
		if got := gcPercent(); got != tc.want {
			t.Errorf("%s: GOGC %d, want %d", tc.name, got, tc.want)
		}
		g.end()
	}
}

func TestLoadGC_OperatorsGOGCIsLeftAlone(t *testing.T) {
	t.Setenv("GOGC", "150")
	prev := debug.SetGCPercent(150)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	g := newLoadGC(false)
	done := g.firstPass()
	done()
	g.end()
	if got := gcPercent(); got != 150 {
		t.Fatalf("GOGC %d, want the operator's 150", got)
	}
}

// noFloor has g see a live heap so large that the floor never raises the
// target: the test's own heap is small, and the floor would otherwise
// depend on whether a collection ran before it.
func noFloor(g *loadGC) { g.live = func() uint64 { return 100 * heapFloor } }

// managedGC leaves GOGC unset (a loadGC manages the target) and the
// target at started for the test, restoring both after it.
func managedGC(t *testing.T, started int) {
	t.Helper()
	t.Setenv("GOGC", "") // restored after the test; unset below
	unsetenv(t, "GOGC")
	prev := debug.SetGCPercent(started)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
}

// unsetenv unsets an environment variable for the test (t.Setenv, which
// restores it, must have been called for it first).
func unsetenv(t *testing.T, name string) {
	t.Helper()
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

func TestFloorPercent(t *testing.T) {
	for _, tc := range []struct {
		percent int
		live    uint64
		want    int
	}{
		{100, 0, 100},                     // no collection yet: the target as is
		{100, heapFloor, 100},             // the goal is heapFloor above live already
		{100, heapFloor / 4, 400},         // raised so that the goal is live + heapFloor
		{100, 10 * heapFloor, 100},        // a large heap keeps the target
		{25, heapFloor, 100},              // an eager target too is raised over a small heap
		{-1, 1 << 20, -1},                 // collection off stays off
		{100, 1, 100_000},                 // bounded
		{300, heapFloor / 2, 300},         // a higher target than the floor needs stays
		{100, heapFloor / 3, 300},         // rounded down: 64 MiB * 100 / (64 MiB / 3)
		{100, heapFloor/3 + 1, 299},       // just over a third
		{100, uint64(heapFloor) * 2, 100}, // twice the floor live: the floor is below the target
	} {
		if got := floorPercent(tc.percent, tc.live); got != tc.want {
			t.Errorf("floorPercent(%d, %d) = %d, want %d", tc.percent, tc.live, got, tc.want)
		}
	}
}

func TestLoadGC_FloorOutsideTheEagerLoad(t *testing.T) {
	const started = 100
	managedGC(t, started)

	g := newLoadGC(false)
	live := uint64(heapFloor / 4)
	g.live = func() uint64 { return live }
	g.afterGC()
	if got := gcPercent(); got != loadGCPercent {
		t.Fatalf("during the eager load: GOGC %d, want %d (no floor)", got, loadGCPercent)
	}
	done := g.firstPass()
	if got := gcPercent(); got != 400 {
		t.Fatalf("during a first pass over a small heap: GOGC %d, want 400", got)
	}
	done()
	g.end()
	if got := gcPercent(); got != 400 {
		t.Fatalf("after the load, small heap: GOGC %d, want 400", got)
	}
	live = 4 * heapFloor
	g.afterGC()
	if got := gcPercent(); got != started {
		t.Fatalf("after the load, large heap: GOGC %d, want the start's %d", got, started)
	}
	live = heapFloor / 2
	g.afterGC()
	if got := gcPercent(); got != 200 {
		t.Fatalf("the heap shrank again: GOGC %d, want 200", got)
	}
}

func TestLoadGC_WatchGCFollowsCollections(t *testing.T) {
	managedGC(t, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newLoadGC(false)
	g.end()
	g.watchGC(ctx)
	// A test binary's live heap is far under heapFloor: once a collection
	// ran and its finalizer reported, the target is raised.
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after collections", gcPercent())
		}
		runtime.GC()
		runtime.Gosched()
	}
	if live := liveHeap(); live == 0 || live >= heapFloor {
		t.Fatalf("live heap %d bytes: want some, under %d", live, heapFloor)
	}
}

func TestLoadGC_FirstPassKeepsAHigherStartingTarget(t *testing.T) {
	const started = 3 * firstPassGCPercent
	managedGC(t, started)
	g := newLoadGC(false)
	noFloor(g)
	done := g.firstPass()
	if got := gcPercent(); got != started {
		t.Fatalf("first pass: GOGC %d, want the start's %d", got, started)
	}
	done()
	g.end()
}

func TestLoadGC_BusyAfterTheLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		started int
		want    int // while busy
	}{
		{"the default target", 100, busyGCPercent},
		{"a higher starting target stays", 300, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			managedGC(t, tc.started)
			g := newLoadGC(false)
			noFloor(g)
			g.setBusy(true)
			if got := gcPercent(); got != loadGCPercent {
				t.Fatalf("busy during the load: GOGC %d, want the load's %d", got, loadGCPercent)
			}
			g.end()
			if got := gcPercent(); got != tc.want {
				t.Fatalf("busy after the load: GOGC %d, want %d", got, tc.want)
			}
			g.setBusy(false)
			if got := gcPercent(); got != tc.started {
				t.Fatalf("quiet again: GOGC %d, want %d", got, tc.started)
			}
		})
	}
}

// A first naming of Kubernetes Services is collected eagerly, after the
// load and even while busy, when it has kubeEagerMin Services or more,
// until its tail has passed.
func TestLoadGC_KubernetesFirstPass(t *testing.T) {
	const started = 100
	managedGC(t, started)
	g := newLoadGC(false)
	noFloor(g)
	g.end()
	small := g.kubeFirstPass(kubeEagerMin - 1)
	if got := gcPercent(); got != started {
		t.Fatalf("a small first naming: GOGC %d, want %d", got, started)
	}
	small()
	g.tail = 50 * time.Millisecond
	done := g.kubeFirstPass(kubeEagerMin)
	g.setBusy(true)
	if got := gcPercent(); got != loadGCPercent {
		t.Fatalf("a first naming, busy: GOGC %d, want %d", got, loadGCPercent)
	}
	done()
	done()
	if got := gcPercent(); got != loadGCPercent {
		t.Fatalf("the tail of a first naming: GOGC %d, want %d", got, loadGCPercent)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() == loadGCPercent && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := gcPercent(); got != busyGCPercent {
		t.Fatalf("after the naming, busy: GOGC %d, want %d", got, busyGCPercent)
	}
	g.setBusy(false)
	if got := gcPercent(); got != started {
		t.Fatalf("after the naming, quiet: GOGC %d, want %d", got, started)
	}
}

// TestReturnPacer feeds returnPacer second by second and pins the seconds
// at which it returns memory: three quiet seconds after a burst, then at
// least returnEvery apart, that interval doubling (up to maxReturnEvery)
// each time a burst comes back sooner than it after a return, and falling
// back once a burst comes later.
func TestReturnPacer(t *testing.T) {
	busy := func(seconds ...int) func(int) (uint64, uint64) {
		set := map[int]bool{}
		for _, s := range seconds {
			set[s] = true
		}
		return func(s int) (uint64, uint64) {
			if set[s] {
				return busyBytes, 0
			}
			return quietBytes - 1, 0
		}
	}
	slow := func(s int) (uint64, uint64) { // ten seconds of quietBytes
		if s < 10 {
			return quietBytes, 0
		}
		return 0, 0
	}
	every5 := func(s int) (uint64, uint64) { // a burst of one second in five
		if s%5 == 0 {
			return busyBytes, 0
		}
		return 0, 0
	}
	const huge = 1 << 40 // a live heap no allocation here adds up to
	for _, tc := range []struct {
		name    string
		seconds int
		second  func(int) (d, f uint64)
		live    uint64
		want    []int
		// busyAt are the seconds a burst begins by what the seconds
		// before it add up to, not by its own.
		busyAt []int
	}{
		{"one burst", 60, busy(0), huge, []int{3}, nil},
		{"nothing busy", 60, busy(), huge, nil, nil},
		{"a quiet second must be quiet", 60, func(s int) (uint64, uint64) {
			if s == 0 {
				return busyBytes, 0
			}
			return quietBytes, 0 // neither busy nor quiet
		}, huge, nil, nil},
		{"frozen resources make a burst", 60, func(s int) (uint64, uint64) {
			if s == 0 {
				return 0, busyFreed
			}
			return 0, 0
		}, huge, []int{3}, nil},
		{"a resource freed is not quiet", 60, func(s int) (uint64, uint64) {
			switch {
			case s == 0:
				return busyBytes, 0
			case s < 10:
				return 0, 1
			}
			return 0, 0
		}, huge, []int{12}, nil},
		{"bursts every 5 s double the interval", 400, every5, huge, []int{3, 23, 63, 143, 303}, nil},
		// Allocation at quietBytes a second is no burst in any one second,
		// but two of them are returnMinBytes...
		{"slow work adds up", 60, slow, 0, []int{12}, []int{1}},
		// ...and eight of them a live heap of busyBytes.
		{"slow work adds up to the live heap", 60, slow, busyBytes, []int{12}, []int{7}},
		{"a trickle under the live heap is no burst", 120, func(int) (uint64, uint64) { return 1 << 20, 0 }, 1 << 30, nil, nil},
		// An idle server's trickle over a small live heap: a burst each
		// time it adds up to returnIdleBytes, returned three quiet seconds
		// later; each burst after the first starts sooner than the
		// interval after the last return, which doubles (20 s, then 40).
		{"a trickle adds up over a small live heap", 60, func(int) (uint64, uint64) { return 1 << 20, 0 }, 0, []int{6, 26}, []int{3, 10, 30}},
		// Over a live heap of 64 MiB it adds up to an eighth of it.
		{"a trickle adds up to an eighth of the live heap", 60, func(int) (uint64, uint64) { return 1 << 20, 0 }, 64 << 20, []int{10, 30}, []int{7, 18, 38}},
		// The cache freezes in passes ten seconds apart.
		{"freezing in passes adds up", 60, func(s int) (uint64, uint64) {
			if s%10 == 0 && s < 30 {
				return 0, busyFreed / 2
			}
			return 0, 0
		}, huge, []int{13}, []int{10}},
		{"a late burst sets the interval back", 260, busy(0, 50, 56, 200, 205), huge, []int{3, 53, 73, 203, 223}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p returnPacer
			start := time.Unix(1_000_000, 0)
			var got []int
			pending := false // a burst awaits its return (the gauge)
			for s := range tc.seconds {
				d, f := tc.second(s)
				now := start.Add(time.Duration(s) * time.Second)
				if d >= busyBytes || f >= busyFreed || slices.Contains(tc.busyAt, s) {
					pending = true
				}
				if p.poll(now, d, f, tc.live, 0) {
					got = append(got, s)
					p.returned(now)
					pending = false
				}
				if p.busy != pending {
					t.Fatalf("second %d: pending %v, want %v", s, p.busy, pending)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("returned at seconds %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReturnPacer_IdleHeap: free heap not yet returned starts a burst in
// a quiet second once it reaches returnIdleBytes, and only then.
func TestReturnPacer_IdleHeap(t *testing.T) {
	for _, tc := range []struct {
		name string
		// second gives what second s allocated and the idle heap at its end
		second func(s int) (d, idle uint64)
		want   []int
	}{
		{"idle heap under the bound stays", func(s int) (uint64, uint64) { return 0, returnIdleBytes - 1 }, nil},
		{"idle heap at the bound is returned", func(s int) (uint64, uint64) {
			if s < 20 {
				return 0, 0
			}
			return 0, returnIdleBytes
		}, []int{23}},
		{"not while the seconds are not quiet", func(s int) (uint64, uint64) {
			if s < 30 {
				return quietBytes, returnIdleBytes
			}
			return 0, returnIdleBytes
		}, []int{33}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p returnPacer
			start := time.Unix(1_000_000, 0)
			p.returned(start) // the start's return
			var got []int
			for s := 1; s < 60; s++ {
				d, idle := tc.second(s)
				now := start.Add(time.Duration(s) * time.Second)
				if p.poll(now, d, 0, 1<<40, idle) {
					got = append(got, s)
					break // each case is about its first return
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("returned at seconds %v, want %v", got, tc.want)
			}
		})
	}
}
