package resource

import (
	"encoding/binary"
	"hash/fnv"
	"strings"
)

// The control plane derives names and label values from the names users
// give, and keeps them within the limits of where they go with one stable
// hash: a resource synced to another control plane is named
// <name>-<hash> (internal/zonesync HashedName), and a name too long for a
// label value is shortened to <start of name>-<hash> in the
// kuma.io/display-name label (DisplayName). docs/multizone.md documents
// both.

// hashAlphabet spells a hash: no vowels, so that it never spells a word,
// and no characters that are invalid in DNS labels.
const hashAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// HashLen is the length of a hash: 27^14 > 2^64, so it keeps every bit
// of the 64-bit FNV-1a sum.
const HashLen = 14

// maxLabel is the most bytes of a DNS label and of a label value.
const maxLabel = 63

// Hash returns the hash of parts: FNV-1a (64 bits) over each part preceded
// by its length (uvarint), so that ("zone-1", "ns") and ("zone-1n", "s")
// hash apart (Kuma concatenates the parts, and they collide), spelled in
// HashLen characters of hashAlphabet. It depends only on its arguments.
func Hash(parts ...string) string {
	h := hash(parts)
	return string(h[:])
}

func hash(parts []string) [HashLen]byte {
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	for _, part := range parts {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
		h.Write([]byte(part))
	}
	sum := h.Sum64()
	var out [HashLen]byte
	for i := HashLen - 1; i >= 0; i-- {
		out[i] = hashAlphabet[sum%uint64(len(hashAlphabet))]
		sum /= uint64(len(hashAlphabet))
	}
	return out
}

// WithHash returns name-hash, where hash is the Hash of parts, and name is
// cut so that the whole fits limit bytes and its last dot-separated label
// 63. The whole is cut first: a cut inside an earlier label makes that one
// the last, and it is then cut in its turn. A cut may leave a dash or a
// dot at the end, which the suffix would turn into an invalid label, so
// those go too. name must begin with a letter or digit.
func WithHash(name string, limit int, parts ...string) string {
	prefix := name
	if keep := limit - 1 - HashLen; len(prefix) > keep {
		prefix = strings.TrimRight(prefix[:keep], "-.")
	}
	last := strings.LastIndexByte(prefix, '.') + 1
	if keep := maxLabel - 1 - HashLen; len(prefix)-last > keep {
		prefix = strings.TrimRight(prefix[:last+keep], "-.")
	}
	h := hash(parts)
	return prefix + "-" + string(h[:])
}

// DisplayName returns the kuma.io/display-name label of a resource whose
// name (where it was created) is name: name itself when it fits a label
// value (63 bytes), which every service name does; otherwise, for the
// longer names of Dataplanes and HostnameGenerators (DNS-1123 subdomains
// of up to 253 bytes), its first 48 bytes without a trailing dash or dot,
// a dash and the Hash of the whole name. The label is then valid on every
// control plane the resource reaches, where a longer one would be refused,
// and two names that begin alike keep different labels.
func DisplayName(name string) string {
	if len(name) <= maxLabel || name == "" {
		return name
	}
	return WithHash(name, maxLabel, name)
}
