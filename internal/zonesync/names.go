package zonesync

import (
	"encoding/binary"
	"hash/fnv"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
)

// hashAlphabet spells the hash suffix: no vowels, so that a suffix never
// spells a word, and no characters that are invalid in DNS labels.
const hashAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// hashLen is the length of the suffix: 27^14 > 2^64, so the suffix keeps
// every bit of the 64-bit hash.
const hashLen = 14

// Name limits: the names of service kinds become DNS labels in hostnames
// (RFC 1035: 63 bytes), the others are DNS subdomains (253 bytes).
const (
	maxServiceName = 63
	maxName        = 253
)

// HashedName is the name a resource gets where it is synced to:
// <name>-<hash>, where the hash covers mesh, name, zone and namespace (the
// MeshService multizone design record), each part written with its length
// before it, so that ("zone-1", "ns") and ("zone-1n", "s") hash apart (Kuma
// concatenates the parts, and they collide). The name part is shortened so
// that the whole fits 63 bytes for service kinds and 253 for the others
// (and its last label 63); the result depends only on the arguments.
func HashedName(kind resource.Kind, mesh, name, zone, namespace string) string {
	limit := maxName
	if d, ok := resource.Lookup(kind); ok && d.ServiceKind {
		limit = maxServiceName
	}
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	for _, part := range []string{mesh, name, zone, namespace} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
		h.Write([]byte(part))
	}
	sum := h.Sum64()
	suffix := make([]byte, hashLen)
	for i := hashLen - 1; i >= 0; i-- {
		suffix[i] = hashAlphabet[sum%uint64(len(hashAlphabet))]
		sum /= uint64(len(hashAlphabet))
	}
	// The suffix joins the last label of the name, which must stay within
	// 63 bytes, and the whole within the kind's limit. A cut may leave a
	// dash or a dot at the end, which the suffix would turn into an invalid
	// label, so those go too.
	prefix := name
	last := strings.LastIndexByte(prefix, '.') + 1
	if keep := maxServiceName - 1 - hashLen; len(prefix)-last > keep {
		prefix = strings.TrimRight(prefix[:last+keep], "-.")
	}
	if keep := limit - 1 - hashLen; len(prefix) > keep {
		prefix = strings.TrimRight(prefix[:keep], "-.")
	}
	return prefix + "-" + string(suffix)
}
