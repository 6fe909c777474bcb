package reconcile

import (
	"encoding/binary"
	"hash/maphash"
)

// Digest sums the values a controller writes, so that an Inflight holds 8
// bytes per write in flight instead of the value. A first pass over a
// large store writes every resource, and the values it would keep until
// each echo arrives (a few small slices per resource) are allocated among
// the records the controller keeps for good; once freed, they leave those
// records' spans half empty. Two different values have the same sum with
// probability 2^-64; the cost of that would be one write skipped until
// the next event for that resource (or the periodic resync of a
// controller that has one).
//
// The zero value is ready: its seed is chosen on first use and kept. Not
// safe for concurrent use.
type Digest struct{ h maphash.Hash }

// Reset starts a new sum.
func (d *Digest) Reset() { d.h.Reset() }

// String adds s, after its length, so that the fields of a value cannot
// run into each other.
func (d *Digest) String(s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	_, _ = d.h.Write(n[:])
	_, _ = d.h.WriteString(s)
}

// Sum returns the sum of what was added since Reset.
func (d *Digest) Sum() uint64 { return d.h.Sum64() }
