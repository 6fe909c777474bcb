package ipam_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/ipam"
)

// The property test and the fuzz target drive a pool and a model of it with
// the same operations, as the VIP controller would: Allocate, Release with a
// quarantine, Reserve (a ClusterIP), Quarantine, Expire (deleting persisted
// records), clock advances, and restarts that rebuild the pool from the used
// addresses and the persisted quarantine records only. Small pools make
// exhaustion and reuse frequent.
//
// The model predicts every result exactly: which address Allocate returns
// (next-fit from the cursor), every error, Stats, NextExpiry and Expire.
// On top of that, independent of the model, two safety invariants are
// checked with what the test itself records: an address is never handed
// out while someone holds it, and never before the end of the latest
// quarantine given to it (the truth, which a restart does not lose).

var randomPrefixes = []string{
	"241.0.0.0/28",
	"fd00::/124",
	"255.255.255.240/28", // at the top of IPv4
	"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0/124", // at the top of IPv6
}

const tick = time.Second

type opKind int

const (
	opAllocate opKind = iota
	opAllocate2
	opAllocate3
	opRelease
	opReserve
	opQuarantine
	opReleaseAny
	opAdvance
	opExpire
	opRestart
	numOps
)

func (o opKind) String() string {
	return [...]string{"Allocate", "Allocate", "Allocate", "Release", "Reserve", "Quarantine", "ReleaseAny", "Advance", "Expire", "Restart"}[o]
}

type harness struct {
	t      testing.TB
	prefix netip.Prefix
	pool   *ipam.Pool
	now    time.Time
	step   int

	usable []netip.Addr // in order
	others []netip.Addr // not in the pool: first, last, other family, outside, zoned
	slots  []slot       // per usable address
	cursor int          // index in usable
}

// slot is the model's state of one usable address.
type slot struct {
	used  bool
	inQ   bool      // quarantined, as the pool holds it: ended ones until dropped
	until time.Time // end of the quarantine, if inQ
	left  bool      // quarantine ended since the last Expire

	// What a controller persists, and what the test knows for sure.
	hasRecord bool
	record    time.Time // the persisted quarantine record
	hasNB     bool
	notBefore time.Time // latest quarantine end given to the address
}

func newHarness(t testing.TB, prefix string) *harness {
	h := &harness{t: t, prefix: netip.MustParsePrefix(prefix), now: t0}
	var err error
	if h.pool, err = ipam.NewPool(h.prefix); err != nil {
		t.Fatal(err)
	}
	last := lastAddr(h.prefix)
	for a := h.prefix.Addr().Next(); a != last; a = a.Next() {
		h.usable = append(h.usable, a)
	}
	h.slots = make([]slot, len(h.usable))
	h.others = []netip.Addr{h.prefix.Addr(), last, netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("2001:db8::1")}
	if h.prefix.Addr().Is6() {
		h.others = append(h.others, h.usable[0].WithZone("eth0"))
	}
	return h
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper() // the step number locates a failure
	h.t.Fatalf("step %d (now +%s): %s", h.step, h.now.Sub(t0), fmt.Sprintf(format, args...))
}

// pick returns an address of the pool and its index or, for some
// arguments, one outside it and -1.
func (h *harness) pick(arg byte) (netip.Addr, int) {
	i := int(arg) % (len(h.usable) + len(h.others))
	if i < len(h.usable) {
		return h.usable[i], i
	}
	return h.others[i-len(h.usable)], -1
}

// drop models the pool dropping the quarantines ended at now.
func (h *harness) drop() {
	for i := range h.slots {
		if s := &h.slots[i]; s.inQ && !s.until.After(h.now) {
			s.inQ, s.left = false, true
		}
	}
}

func wantErr(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

func (h *harness) do(op opKind, arg byte) {
	h.step++
	switch op {
	case opAllocate, opAllocate2, opAllocate3:
		h.allocate()
	case opRelease:
		var used []int
		for i := range h.slots {
			if h.slots[i].used {
				used = append(used, i)
			}
		}
		if len(used) == 0 {
			h.allocate()
			break
		}
		i := used[int(arg)%len(used)]
		h.release(h.usable[i], i, arg)
	case opReleaseAny:
		a, i := h.pick(arg)
		h.release(a, i, arg)
	case opReserve:
		a, i := h.pick(arg)
		err := h.pool.Reserve(a)
		var want error
		switch {
		case i < 0:
			want = ipam.ErrNotInPool
		case h.slots[i].inQ:
			s := &h.slots[i]
			s.inQ, s.used = false, true
			// A live service took the address: its quarantine is consumed.
			s.hasNB = false
		case h.slots[i].used:
			want = ipam.ErrInUse
		default:
			h.slots[i].used = true
		}
		if !wantErr(err, want) {
			h.fatalf("Reserve(%s) = %v, want %v", a, err, want)
		}
	case opQuarantine:
		a, i := h.pick(arg)
		until := h.now.Add(time.Duration(arg>>4%5) * tick)
		err := h.pool.Quarantine(a, until)
		var want error
		switch {
		case i < 0:
			want = ipam.ErrNotInPool
		case h.slots[i].used:
			want = ipam.ErrInUse
		default:
			if s := &h.slots[i]; !s.inQ || until.After(s.until) {
				s.inQ, s.until = true, until
			}
			h.persist(i, until)
		}
		if !wantErr(err, want) {
			h.fatalf("Quarantine(%s) = %v, want %v", a, err, want)
		}
	case opAdvance:
		h.now = h.now.Add(time.Duration(arg%3) * tick)
	case opExpire:
		h.drop()
		var want []netip.Addr
		for i := range h.slots {
			s := &h.slots[i]
			if s.left && !s.inQ && !s.used {
				want = append(want, h.usable[i])
			}
			s.left = false
		}
		got := h.pool.Expire(h.now)
		if !slices.Equal(want, got) {
			h.fatalf("Expire (-want +got):\n%s", cmp.Diff(want, got, addrComparer))
		}
		for _, a := range got {
			h.slots[h.index(a)].hasRecord = false // delete the record
		}
	case opRestart:
		h.restart(arg)
	}
	h.check()
}

func (h *harness) index(a netip.Addr) int {
	i, ok := slices.BinarySearchFunc(h.usable, a, netip.Addr.Compare)
	if !ok {
		h.fatalf("%s is not a usable address", a)
	}
	return i
}

func (h *harness) persist(i int, until time.Time) {
	s := &h.slots[i]
	if !s.hasRecord || until.After(s.record) {
		s.hasRecord, s.record = true, until
	}
	if !s.hasNB || until.After(s.notBefore) {
		s.hasNB, s.notBefore = true, until
	}
}

func (h *harness) allocate() {
	h.drop()
	want := -1
	for k := range h.slots {
		i := (h.cursor + k) % len(h.slots)
		if s := &h.slots[i]; !s.used && !s.inQ {
			want = i
			break
		}
	}
	got, err := h.pool.Allocate(h.now)
	if want < 0 {
		if !errors.Is(err, ipam.ErrExhausted) {
			h.fatalf("Allocate = %v, %v; want ErrExhausted", got, err)
		}
		return
	}
	if err != nil || got != h.usable[want] {
		h.fatalf("Allocate = %v, %v; want %s (next-fit from %s)", got, err, h.usable[want], h.usable[h.cursor])
	}
	// The safety invariants, from the test's own records.
	s := &h.slots[want]
	if s.used {
		h.fatalf("Allocate handed out %s, which is held", got)
	}
	if s.hasNB && h.now.Before(s.notBefore) {
		h.fatalf("Allocate handed out %s inside its quarantine (until +%s)", got, s.notBefore.Sub(t0))
	}
	s.used = true
	h.cursor = (want + 1) % len(h.slots)
}

func (h *harness) release(a netip.Addr, i int, arg byte) {
	until := h.now.Add(time.Duration(arg>>4%4) * tick)
	err := h.pool.Release(a, until)
	var want error
	switch {
	case i < 0:
		want = ipam.ErrNotInPool
	case !h.slots[i].used:
		want = ipam.ErrNotInUse
	default:
		s := &h.slots[i]
		s.used, s.inQ, s.until = false, true, until
		h.persist(i, until)
	}
	if !wantErr(err, want) {
		h.fatalf("Release(%s) = %v, want %v", a, err, want)
	}
}

// restart rebuilds the pool as the controller does after a crash or a
// leader change: Reserve every address in status (in an order set by arg),
// then Quarantine every persisted record, deleting those of addresses in
// use; and, for odd arg, restore the cursor.
func (h *harness) restart(arg byte) {
	p, err := ipam.NewPool(h.prefix)
	if err != nil {
		h.fatalf("NewPool: %v", err)
	}
	var used []int
	for i := range h.slots {
		if h.slots[i].used {
			used = append(used, i)
		}
	}
	rand.New(rand.NewPCG(uint64(arg), 0)).Shuffle(len(used), func(i, j int) { used[i], used[j] = used[j], used[i] })
	for _, i := range used {
		if err := p.Reserve(h.usable[i]); err != nil {
			h.fatalf("restart: Reserve(%s): %v", h.usable[i], err)
		}
	}
	for i := range h.slots {
		s := &h.slots[i]
		s.inQ, s.left = false, false
		if !s.hasRecord {
			continue
		}
		err := p.Quarantine(h.usable[i], s.record)
		switch {
		case s.used:
			if !errors.Is(err, ipam.ErrInUse) {
				h.fatalf("restart: Quarantine(%s) of a used address = %v, want ErrInUse", h.usable[i], err)
			}
			s.hasRecord = false // stale: delete it
		case err != nil:
			h.fatalf("restart: Quarantine(%s): %v", h.usable[i], err)
		default:
			s.inQ, s.until = true, s.record
		}
	}
	if arg%2 == 1 {
		if err := p.SetCursor(h.usable[h.cursor]); err != nil {
			h.fatalf("restart: SetCursor: %v", err)
		}
	} else {
		h.cursor = 0
	}
	h.pool = p
}

// check compares Stats, NextExpiry and Cursor with the model.
func (h *harness) check() {
	var size, used, quarantined uint64
	size = uint64(len(h.slots))
	var next time.Time
	anyQ := false
	for i := range h.slots {
		s := &h.slots[i]
		if s.used {
			used++
		}
		if !s.inQ {
			continue
		}
		if s.until.After(h.now) {
			quarantined++
		}
		if !anyQ || s.until.Before(next) {
			next = s.until
		}
		anyQ = true
	}
	if gs, gu, gq := h.pool.Stats(h.now); gs != size || gu != used || gq != quarantined {
		h.fatalf("Stats = %d, %d, %d; want %d, %d, %d", gs, gu, gq, size, used, quarantined)
	}
	if got, ok := h.pool.NextExpiry(); ok != anyQ || !got.Equal(next) {
		h.fatalf("NextExpiry = +%s, %v; want +%s, %v", got.Sub(t0), ok, next.Sub(t0), anyQ)
	}
	if got := h.pool.Cursor(); got != h.usable[h.cursor] {
		h.fatalf("Cursor = %s, want %s", got, h.usable[h.cursor])
	}
}

// run drives a harness from bytes: the first picks the prefix, then each
// pair is an operation and its argument.
func run(t testing.TB, data []byte) {
	if len(data) == 0 {
		return
	}
	h := newHarness(t, randomPrefixes[int(data[0])%len(randomPrefixes)])
	for i := 1; i+1 < len(data); i += 2 {
		h.do(opKind(data[i])%numOps, data[i+1])
	}
}

func TestPool_Random(t *testing.T) {
	seeds, steps := 400, 600
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		data := make([]byte, 1+2*steps)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		data[0] = byte(seed)
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			run(t, data)
		})
	}
}

func FuzzPool(f *testing.F) {
	f.Add([]byte{0, byte(opAllocate), 0, byte(opRelease), 3, byte(opAllocate), 0})
	f.Add([]byte{1, byte(opReserve), 2, byte(opQuarantine), 5, byte(opRestart), 1, byte(opAllocate), 0})
	f.Add([]byte{2, byte(opReleaseAny), 20, byte(opReserve), 15, byte(opExpire), 0, byte(opAdvance), 2})
	// Fill a /28, free two with a quarantine, restart, wait, refill.
	fill := []byte{3}
	for range 14 {
		fill = append(fill, byte(opAllocate), 0)
	}
	fill = append(fill, byte(opRelease), 3, byte(opRelease), 7, byte(opRestart), 0,
		byte(opAllocate), 0, byte(opAdvance), 2, byte(opAdvance), 2, byte(opAllocate), 0, byte(opExpire), 0)
	f.Add(fill)
	f.Fuzz(func(t *testing.T, data []byte) { run(t, data) })
}
