package meshservices

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/meshnames/meshnames/internal/validate"
)

const (
	maxName = 63 // a DNS-1035 label
	// hashLen hex digits of SHA-256 of the tag end a shortened or
	// disambiguated name, after a hyphen.
	hashLen = 8
)

// Compliant returns the DNS-1035 form of a kuma.io/service tag value: the
// value itself when it is a label already; otherwise lowercase, with every
// character other than a letter, digit or hyphen ('_' and '.' above all)
// replaced by '-', hyphens trimmed from the ends, and "svc-" in front when
// it does not start with a letter. The result is not shortened: tags whose
// compliant forms are equal compete for one name (see Name).
func Compliant(tag string) string {
	if validate.DNS1035Label(tag) == "" {
		return tag
	}
	b := []byte(strings.ToLower(tag))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), "-")
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "svc-" + s
		s = strings.TrimRight(s, "-")
	}
	return s
}

// Name is the name a tag's MeshService gets when nothing else holds it: its
// compliant form, shortened when longer than 63 characters to 54 of them
// and the tag's hash (so that two long tags sharing a prefix differ).
func Name(tag string) string {
	c := Compliant(tag)
	if len(c) <= maxName {
		return c
	}
	return Suffixed(tag)
}

// Suffixed is the name of a tag whose Name is held by another service: the
// compliant form cut to 54 characters, a hyphen and the tag's hash. It is
// stable, so that the service keeps its name across restarts.
func Suffixed(tag string) string {
	c := Compliant(tag)
	c = strings.TrimRight(c[:min(len(c), maxName-hashLen-1)], "-")
	return c + "-" + tagHash(tag)
}

func tagHash(tag string) string {
	sum := sha256.Sum256([]byte(tag))
	return hex.EncodeToString(sum[:])[:hashLen]
}
