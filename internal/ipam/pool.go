package ipam

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"time"
)

// Errors of the pool operations, wrapped with the operation and the address:
// test them with errors.Is.
var (
	// ErrNotInPool: the address is not one of the pool's usable addresses
	// (another family, outside the prefix, or its first or last address).
	ErrNotInPool = errors.New("not in pool")
	// ErrInUse: the address is already used (Reserve), or used where a free
	// address is needed (Quarantine).
	ErrInUse = errors.New("in use")
	// ErrNotInUse: Release of an address that is free or quarantined.
	ErrNotInUse = errors.New("not in use")
	// ErrExhausted: Allocate found every usable address used or quarantined.
	// Allocate returns it as an *ExhaustedError, which says how many are
	// quarantined and when the first quarantine ends.
	ErrExhausted = errors.New("pool exhausted")
)

// ExhaustedError is the error of Allocate on a pool with no free address. It
// matches ErrExhausted with errors.Is; errors.As gives the details a
// controller puts in a status condition or uses to schedule a retry. It is
// formatted only when printed, so failing is cheap.
type ExhaustedError struct {
	Prefix      netip.Prefix
	Size        uint64    // usable addresses, all used or quarantined
	Quarantined uint64    // of which quarantined, at the now given to Allocate
	NextExpiry  time.Time // the first end of a quarantine, if Quarantined > 0
}

func (e *ExhaustedError) Error() string {
	if e.Quarantined == 0 {
		return fmt.Sprintf("allocate from %s: %s: all %d addresses in use", e.Prefix, ErrExhausted, e.Size)
	}
	return fmt.Sprintf("allocate from %s: %s: %d addresses in quarantine, the first until %s",
		e.Prefix, ErrExhausted, e.Quarantined, e.NextExpiry.UTC().Format(time.RFC3339Nano))
}

func (e *ExhaustedError) Unwrap() error { return ErrExhausted }

// maxSize caps the usable addresses of a prefix with more than 64 host bits
// at what an offset can count (see the package doc).
const maxSize = math.MaxUint64 - 1

// Pool is a set of usable addresses of one prefix, each free, used or
// quarantined. Its zero value is not usable: build one with NewPool.
type Pool struct {
	prefix netip.Prefix
	is4    bool
	base   u128   // the first usable address, offset 0
	size   uint64 // usable addresses

	taken  bitmap // used or quarantined
	ntaken uint64
	q      quarantine // the quarantined subset of taken
	cursor uint64     // where the next Allocate starts looking

	// left holds the addresses whose quarantine ended since the last
	// Expire, for Expire to report; an address may appear more than once.
	left []uint64
}

// NewPool returns an empty pool over prefix, which must be valid and masked
// (241.0.0.0/8, not 241.0.0.1/8) and have at least two usable addresses: the
// first and the last address of the prefix are never handed out, so the
// longest prefixes are an IPv4 /30 and an IPv6 /126. Building a pool
// allocates at most 66 KiB (the page index of a dense pool, size/512 bytes)
// and, above 2^25 addresses, nothing that depends on the size.
func NewPool(prefix netip.Prefix) (*Pool, error) {
	if !prefix.IsValid() {
		return nil, errors.New("invalid prefix")
	}
	if m := prefix.Masked(); prefix != m {
		return nil, fmt.Errorf("prefix %s: not masked: host bits must be zero, want %s", prefix, m)
	}
	host := prefix.Addr().BitLen() - prefix.Bits()
	var size uint64
	switch {
	case host < 2:
		size = 0
	case host >= 64:
		size = maxSize
	default:
		size = 1<<host - 2
	}
	if size < 2 {
		return nil, fmt.Errorf("prefix %s: too small: %d usable addresses, want at least 2 (the first and last address are never handed out)", prefix, size)
	}
	first := fromAddr(prefix.Addr())
	return &Pool{
		prefix: prefix,
		is4:    prefix.Addr().Is4(),
		base:   first.add(1),
		size:   size,
		taken:  newBitmap(size, size <= denseMax),
		q:      newQuarantine(),
	}, nil
}

// Prefix returns the prefix the pool was built from.
func (p *Pool) Prefix() netip.Prefix { return p.prefix }

// Size returns the number of usable addresses.
func (p *Pool) Size() uint64 { return p.size }

// Contains reports whether ip is one of the pool's usable addresses.
func (p *Pool) Contains(ip netip.Addr) bool {
	_, ok := p.offset(ip)
	return ok
}

// Reserve marks ip used: an address read back from status when the
// controller rebuilds the pool, or one a service already holds inside the
// pool (a Kubernetes ClusterIP). Reserving a quarantined address is allowed
// and ends its quarantine, since a live service holds it; the caller
// replaces the persisted quarantine record with its own allocation record
// (Expire does not report it: see there).
func (p *Pool) Reserve(ip netip.Addr) error {
	off, ok := p.offset(ip)
	if !ok {
		return fmt.Errorf("reserve %s: %w %s", ip, ErrNotInPool, p.prefix)
	}
	if p.q.remove(off) {
		return nil // still taken: now used
	}
	if p.taken.test(off) {
		return fmt.Errorf("reserve %s: %w", ip, ErrInUse)
	}
	p.take(off)
	return nil
}

// Allocate hands out the first free address at or after the cursor, wrapping
// around, and moves the cursor past it (next-fit), so an address freed
// behind the cursor is handed out again as late as possible. A quarantine
// that has ended at now no longer blocks its address. When no address is
// free it returns ErrExhausted in O(1), and the pool is unchanged but for
// the ended quarantines it dropped. The error is an *ExhaustedError.
func (p *Pool) Allocate(now time.Time) (netip.Addr, error) {
	p.expire(now)
	if p.ntaken == p.size {
		e := &ExhaustedError{Prefix: p.prefix, Size: p.size}
		if q, ok := p.q.peek(); ok {
			e.Quarantined, e.NextExpiry = uint64(p.q.len()), q.until
		}
		return netip.Addr{}, e
	}
	off, ok := p.taken.nextClear(p.cursor, p.size)
	if !ok {
		off, ok = p.taken.nextClear(0, p.cursor)
	}
	if !ok {
		// The free count says there is a clear bit; not finding one is a
		// bug in this package, not a state a caller can cause.
		panic(fmt.Sprintf("ipam: pool %s counts %d free addresses but has none", p.prefix, p.size-p.ntaken))
	}
	p.take(off)
	p.cursor = off + 1
	if p.cursor == p.size {
		p.cursor = 0
	}
	return p.addr(off), nil
}

// Release frees a used address and quarantines it until until: Allocate does
// not hand it out before then (ARCHITECTURE.md section 5: a freed VIP is not
// reused before DNS caches forget it). Releasing an address that is not used
// (free or quarantined) returns ErrNotInUse.
func (p *Pool) Release(ip netip.Addr, until time.Time) error {
	off, ok := p.offset(ip)
	if !ok {
		return fmt.Errorf("release %s: %w %s", ip, ErrNotInPool, p.prefix)
	}
	if !p.taken.test(off) {
		return fmt.Errorf("release %s: %w", ip, ErrNotInUse)
	}
	if _, q := p.q.get(off); q {
		return fmt.Errorf("release %s: %w: quarantined", ip, ErrNotInUse)
	}
	p.q.put(off, until)
	return nil
}

// Quarantine quarantines a free address until until, as the controller does
// at rebuild from its persisted quarantine records. Quarantining a
// quarantined address keeps the later end. Quarantining a used address
// returns ErrInUse: the record is stale, since a live service holds it.
func (p *Pool) Quarantine(ip netip.Addr, until time.Time) error {
	off, ok := p.offset(ip)
	if !ok {
		return fmt.Errorf("quarantine %s: %w %s", ip, ErrNotInPool, p.prefix)
	}
	if _, q := p.q.get(off); !q {
		if p.taken.test(off) {
			return fmt.Errorf("quarantine %s: %w", ip, ErrInUse)
		}
		p.take(off)
	}
	p.q.put(off, until)
	return nil
}

// Expire drops the quarantines ended at now and returns, sorted, the
// addresses whose quarantine has ended since the previous call and that are
// still free, including those whose end Allocate noticed first (it drops
// ended quarantines itself). A caller that persists quarantines deletes
// their records. An address taken again since (by Allocate, Reserve or
// Quarantine) is left out: its caller wrote a newer record for it, which
// must stay; a quarantine record of an address in use is stale, and
// Quarantine refuses it with ErrInUse at rebuild, when the caller can
// delete it. Until Expire is called the pool remembers one entry per ended
// quarantine, so a caller calls it regularly (each reconcile, or at
// NextExpiry). Cost: O(k log n) for k ended of n quarantined.
func (p *Pool) Expire(now time.Time) []netip.Addr {
	p.expire(now)
	if len(p.left) == 0 {
		return nil
	}
	slices.Sort(p.left)
	out := make([]netip.Addr, 0, len(p.left))
	for i, off := range p.left {
		if i > 0 && off == p.left[i-1] {
			continue
		}
		if p.taken.test(off) {
			continue // taken again: its record is current
		}
		out = append(out, p.addr(off))
	}
	if cap(p.left) > 1024 {
		p.left = nil
	} else {
		p.left = p.left[:0]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Stats returns the number of usable addresses, of used ones, and of those
// quarantined at now. The rest, size-used-quarantined, are free. It does not
// change the pool.
func (p *Pool) Stats(now time.Time) (size, used, quarantined uint64) {
	n := uint64(p.q.len())
	return p.size, p.ntaken - n, n - uint64(p.q.countEnded(now))
}

// NextExpiry returns the earliest end of a quarantine the pool holds, so a
// controller whose pool is exhausted by quarantines knows when to retry. It
// may be in the past when neither Allocate nor Expire has run since.
func (p *Pool) NextExpiry() (time.Time, bool) {
	e, ok := p.q.peek()
	return e.until, ok
}

// Cursor returns the address at which the next Allocate starts looking.
func (p *Pool) Cursor() netip.Addr { return p.addr(p.cursor) }

// SetCursor moves the cursor to ip. A new pool starts at its first usable
// address; a controller that rebuilds a pool may restore the cursor (for
// example past its most recently allocated address) so that the addresses
// freed before the restart stay last in line.
func (p *Pool) SetCursor(ip netip.Addr) error {
	off, ok := p.offset(ip)
	if !ok {
		return fmt.Errorf("set cursor %s: %w %s", ip, ErrNotInPool, p.prefix)
	}
	p.cursor = off
	return nil
}

func (p *Pool) take(off uint64) {
	p.taken.set(off)
	p.ntaken++
}

// expire frees the addresses whose quarantine has ended at now.
func (p *Pool) expire(now time.Time) {
	for {
		off, ok := p.q.popEnded(now)
		if !ok {
			return
		}
		p.taken.clear(off)
		p.ntaken--
		p.left = append(p.left, off)
	}
}

// bytes estimates the memory the pool holds: the bitmap, the quarantine and
// the addresses kept for Expire.
func (p *Pool) bytes() uint64 {
	const qentrySize = 32 + 8 + 24 // heap entry, index map entry (key, value, overhead)
	return 128 + p.taken.bytes() + uint64(p.q.len())*qentrySize + 8*uint64(cap(p.left))
}

func (p *Pool) offset(ip netip.Addr) (uint64, bool) {
	if !ip.IsValid() || ip.Zone() != "" || ip.Is4() != p.is4 {
		return 0, false
	}
	u := fromAddr(ip)
	lo, borrow := bits.Sub64(u.lo, p.base.lo, 0)
	hi, borrow := bits.Sub64(u.hi, p.base.hi, borrow)
	if borrow != 0 || hi != 0 || lo >= p.size {
		return 0, false
	}
	return lo, true
}

func (p *Pool) addr(off uint64) netip.Addr {
	a := p.base.add(off).addr()
	if p.is4 {
		return a.Unmap()
	}
	return a
}

// u128 is an address as a 128-bit number; IPv4 addresses are taken in their
// IPv4-mapped IPv6 form, so one arithmetic serves both families.
type u128 struct{ hi, lo uint64 }

func fromAddr(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (u u128) add(n uint64) u128 {
	lo, carry := bits.Add64(u.lo, n, 0)
	return u128{u.hi + carry, lo}
}

func (u u128) addr() netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo)
	return netip.AddrFrom16(b)
}
