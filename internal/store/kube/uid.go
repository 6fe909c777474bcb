package kube

import (
	"encoding/hex"
	"fmt"
)

// uid is an object's metadata.uid, which the API server makes a UUID in
// its canonical form (lower case, 8-4-4-4-12 hex digits). The store keeps
// one per resource: as 16 bytes it costs nothing beyond the entry, where
// the string cost 48 bytes of its own. The zero uid is an unknown one.
type uid [16]byte

// parseUID reads a canonical UUID; "" is the zero uid.
func parseUID(s string) (uid, error) {
	var u uid
	if s == "" {
		return u, nil
	}
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("metadata.uid %q is not a UUID (8-4-4-4-12 hex digits)", s)
	}
	b := []byte(s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36])
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return u, fmt.Errorf("metadata.uid %q is not a UUID in lower case hex", s)
		}
	}
	if _, err := hex.Decode(u[:], b); err != nil {
		return u, fmt.Errorf("metadata.uid %q: %w", s, err)
	}
	if u == (uid{}) {
		return u, fmt.Errorf("metadata.uid %q is the nil UUID, which no object has", s)
	}
	return u, nil
}

// String is the canonical form; "" for the zero uid.
func (u uid) String() string {
	if u == (uid{}) {
		return ""
	}
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
