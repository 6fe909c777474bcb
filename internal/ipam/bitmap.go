package ipam

import "math/bits"

// A page holds 4096 bits, 64 words, and a one-word summary whose bit j is set
// when word j is full, so finding the next clear bit in a page takes a few
// bit operations whatever its contents. A page is 528 bytes (576 with the
// allocator's rounding): a full /8 is 4096 pages, about 2.3 MiB.
const (
	pageShift = 12
	pageBits  = 1 << pageShift
	pageMask  = pageBits - 1
	pageWords = pageBits / 64

	// denseMax is the largest pool kept in a slice of pages (2^25 addresses,
	// 8192 pages, a 64 KiB slice); larger pools keep their pages in a map.
	denseMax = 1 << 25
)

type page struct {
	w    [pageWords]uint64
	full uint64 // bit j: w[j] == all ones
	n    uint16 // bits set, at most pageBits
}

func (pg *page) test(i uint64) bool { return pg.w[i>>6]&(1<<(i&63)) != 0 }

func (pg *page) set(i uint64) {
	w := i >> 6
	pg.w[w] |= 1 << (i & 63)
	if pg.w[w] == ^uint64(0) {
		pg.full |= 1 << w
	}
	pg.n++
}

func (pg *page) clear(i uint64) {
	w := i >> 6
	pg.w[w] &^= 1 << (i & 63)
	pg.full &^= 1 << w
	pg.n--
}

// nextClear returns the first clear bit at or after i.
func (pg *page) nextClear(i uint64) (uint64, bool) {
	w := i >> 6
	if x := pg.w[w] | (1<<(i&63) - 1); x != ^uint64(0) {
		return w<<6 | uint64(bits.TrailingZeros64(^x)), true
	}
	if w == pageWords-1 {
		return 0, false
	}
	f := pg.full | (1<<(w+1) - 1) // words up to w count as full
	if f == ^uint64(0) {
		return 0, false
	}
	w = uint64(bits.TrailingZeros64(^f))
	return w<<6 | uint64(bits.TrailingZeros64(^pg.w[w])), true
}

// bitmap is a set of offsets in [0, size), stored as pages allocated on first
// use: a slice of pages plus a bitset of full pages when dense, a map of the
// non-empty pages when sparse.
type bitmap struct {
	size      uint64
	dense     []*page  // nil when sparse
	fullPages []uint64 // dense only: bit i set when dense[i] is full
	sparse    map[uint64]*page
}

func newBitmap(size uint64, dense bool) bitmap {
	b := bitmap{size: size}
	if dense {
		n := (size + pageBits - 1) >> pageShift
		b.dense = make([]*page, n)
		b.fullPages = make([]uint64, (n+63)/64)
	} else {
		b.sparse = make(map[uint64]*page)
	}
	return b
}

func (b *bitmap) page(pi uint64) *page {
	if b.dense != nil {
		return b.dense[pi]
	}
	return b.sparse[pi]
}

func (b *bitmap) test(off uint64) bool {
	pg := b.page(off >> pageShift)
	return pg != nil && pg.test(off&pageMask)
}

// set sets a clear bit.
func (b *bitmap) set(off uint64) {
	pi := off >> pageShift
	pg := b.page(pi)
	if pg == nil {
		pg = new(page)
		if b.dense != nil {
			b.dense[pi] = pg
		} else {
			b.sparse[pi] = pg
		}
	}
	pg.set(off & pageMask)
	if b.dense != nil && pg.n == pageBits {
		b.fullPages[pi>>6] |= 1 << (pi & 63)
	}
}

// clear clears a set bit. A sparse bitmap drops a page once it is empty, so
// its memory follows the number of set bits; a dense one keeps its pages, so
// that allocating and releasing around a page boundary does not churn.
func (b *bitmap) clear(off uint64) {
	pi := off >> pageShift
	pg := b.page(pi)
	pg.clear(off & pageMask)
	if b.dense != nil {
		b.fullPages[pi>>6] &^= 1 << (pi & 63)
	} else if pg.n == 0 {
		delete(b.sparse, pi)
	}
}

// nextClear returns the first clear bit in [from, to), to <= size.
func (b *bitmap) nextClear(from, to uint64) (uint64, bool) {
	if from >= to {
		return 0, false
	}
	last := (to - 1) >> pageShift
	for {
		pi := from >> pageShift
		pg := b.page(pi)
		if pg == nil {
			return from, true
		}
		if pg.n < pageBits {
			// A clear bit found past to (only in the last, partial page of
			// the pool, or past the end of a wrapped scan) means none in
			// range: nextClear returns the first one.
			if i, ok := pg.nextClear(from & pageMask); ok {
				if off := pi<<pageShift | i; off < to {
					return off, true
				}
				return 0, false
			}
		}
		if pi >= last {
			return 0, false
		}
		if b.dense != nil {
			next, ok := nextZero(b.fullPages, pi+1, last+1)
			if !ok {
				return 0, false
			}
			pi = next
		} else {
			// Sparse pools are too large to fill: a run of full pages is as
			// long as a run of allocations, walked one lookup per page.
			pi++
		}
		from = pi << pageShift
	}
}

// nextZero returns the first clear bit of words in [from, to).
func nextZero(words []uint64, from, to uint64) (uint64, bool) {
	for w := from >> 6; w<<6 < to; w++ {
		x := words[w]
		if w == from>>6 {
			x |= 1<<(from&63) - 1
		}
		if x != ^uint64(0) {
			if i := w<<6 | uint64(bits.TrailingZeros64(^x)); i < to {
				return i, true
			}
			return 0, false
		}
	}
	return 0, false
}

// bytes estimates the memory the bitmap holds.
func (b *bitmap) bytes() uint64 {
	const pageSize = 8*pageWords + 8 + 8 // words, summary, count (padded)
	if b.dense != nil {
		n := uint64(0)
		for _, pg := range b.dense {
			if pg != nil {
				n++
			}
		}
		return n*pageSize + 8*uint64(len(b.dense)) + 8*uint64(len(b.fullPages))
	}
	// A Go map entry costs about its key, value and a byte of control,
	// rounded up with the load factor: 24 bytes is close enough here.
	return uint64(len(b.sparse)) * (pageSize + 24)
}
