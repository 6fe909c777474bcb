// Package s2dict compresses small documents (a resource's JSON, a few
// hundred bytes) with S2 against a dictionary of typical ones: documents of
// one kind differ in a few names and numbers, so they shrink to a fraction
// of their size against the dictionary, while on their own they would
// barely shrink at all. The encoding lives only in memory, so a dictionary
// may change between releases.
//
// It imports only the S2 codec. A Dict is safe for concurrent use.
package s2dict

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Dict compresses against one dictionary.
type Dict struct {
	d *s2.Dict
	// max bounds what Decode accepts to decode.
	max int
}

// New returns a dictionary of samples: the most common documents last,
// where the encoder finds matches at the shortest offsets; matches start
// at the last occurrence of start in samples (the beginning of the most
// common document). Decode refuses documents of more than max bytes.
func New(samples, start []byte, max int) (*Dict, error) {
	d := s2.MakeDict(samples, start)
	if d == nil {
		return nil, errors.New("s2dict: the samples are too small for a dictionary")
	}
	return &Dict{d: d, max: max}, nil
}

// scratch are buffers for encoding and decoding, reused to spare the
// collector a buffer per call.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// Encode returns head followed by src compressed, in one allocation of
// exactly that size.
func (d *Dict) Encode(head, src []byte) []byte {
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	if n := s2.MaxEncodedLen(len(src)); cap(*buf) < n {
		*buf = make([]byte, n)
	}
	enc := d.d.Encode((*buf)[:cap(*buf)], src)
	out := make([]byte, len(head)+len(enc))
	copy(out[copy(out, head):], enc)
	return out
}

// Decode calls use with src decompressed; use must not keep the bytes.
func (d *Dict) Decode(src []byte, use func(plain []byte) error) error {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return err
	}
	if n > d.max {
		return fmt.Errorf("a compressed document of %d bytes, more than %d", n, d.max)
	}
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	plain, err := d.d.Decode((*buf)[:cap(*buf)], src)
	if err != nil {
		return err
	}
	return use(plain)
}

// DecodeCopy returns src decompressed, in a new slice the caller owns.
func (d *Dict) DecodeCopy(src []byte) ([]byte, error) {
	var out []byte
	err := d.Decode(src, func(plain []byte) error {
		out = append([]byte(nil), plain...)
		return nil
	})
	return out, err
}
