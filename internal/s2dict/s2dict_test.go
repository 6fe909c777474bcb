package s2dict

import (
	"bytes"
	"strings"
	"testing"
)

func TestDict_RoundTripAndBound(t *testing.T) {
	sample := []byte(`{"kind":"Thing","name":"backend","labels":{"team":"payments","zone":"east"}}`)
	d, err := New(sample, []byte(`{"kind"`), 1024)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		``,
		`{"kind":"Thing","name":"frontend","labels":{"team":"payments","zone":"west"}}`,
		strings.Repeat("x", 1024),
	} {
		enc := d.Encode([]byte("head"), []byte(doc))
		if !bytes.HasPrefix(enc, []byte("head")) || cap(enc) != len(enc) {
			t.Errorf("%q: encoded %q (cap %d), want the head first in an exact allocation", doc, enc, cap(enc))
		}
		got, err := d.DecodeCopy(enc[4:])
		if err != nil || string(got) != doc {
			t.Errorf("%q: read back %q, %v", doc, got, err)
		}
	}
	if n := len(d.Encode(nil, []byte(`{"kind":"Thing","name":"frontend","labels":{"team":"payments","zone":"west"}}`))); n > 30 {
		t.Errorf("a document like the sample compressed into %d bytes, want at most 30", n)
	}
	if _, err := d.DecodeCopy(d.Encode(nil, []byte(strings.Repeat("x", 1025)))); err == nil {
		t.Error("decoded a document over the bound")
	}
	if _, err := d.DecodeCopy([]byte{0x80}); err == nil {
		t.Error("decoded damaged bytes")
	}
	if _, err := New([]byte("x"), nil, 1); err == nil {
		t.Error("a dictionary of one byte")
	}
}
