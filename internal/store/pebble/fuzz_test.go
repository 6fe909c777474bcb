package pebble

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// FuzzDecodeRow checks that any stored bytes decode to a row or an error,
// never a panic, and that a decoded row encodes back to the same bytes.
func FuzzDecodeRow(f *testing.F) {
	f.Add(encodeRow(&row{Version: 3, Revision: 17, Labels: `{"a":"b"}`, Spec: `{}`, Status: `{"vips":[]}`, Created: -5, Modified: time.Now().UnixNano()}))
	f.Add(encodeRow(&row{Version: 1, Revision: 1, Deleted: true}))
	f.Add([]byte{0, 0x80})
	f.Fuzz(func(t *testing.T, v []byte) {
		r, err := decodeRow(resource.Key{Kind: resource.MeshService, Mesh: "m", Name: "n"}, v)
		if err != nil {
			return
		}
		if back := encodeRow(r); !bytes.Equal(back, v) && canonicalVarints(v) {
			t.Errorf("decode then encode of %x = %x", v, back)
		}
	})
}

// canonicalVarints reports whether v's integers are minimally encoded, as
// encodeRow writes them: only then must a round trip give the same bytes.
func canonicalVarints(v []byte) bool {
	r, err := decodeRow(resource.Key{}, v)
	if err != nil {
		return false
	}
	return len(encodeRow(r)) == len(v)
}

// FuzzDecodeRecord checks that any stored bytes decode to a record or an
// error, never a panic, and that a decoded record encodes back.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(time.Now().UnixNano(), []string{"name=web", "vip=241.0.0.1"}, []byte(`{"x":1}`)))
	f.Add(encodeRecord(-1, nil, nil))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, v []byte) {
		at, terms, data, err := decodeRecord(v)
		if err != nil {
			return
		}
		back := encodeRecord(at.UnixNano(), terms, data)
		at2, terms2, data2, err := decodeRecord(back)
		if err != nil || !at2.Equal(at) || !slices.Equal(terms2, terms) || !bytes.Equal(data2, data) {
			t.Errorf("record %x does not round-trip: %v %q %x, %v", v, at2, terms2, data2, err)
		}
	})
}
