package validate

import (
	"fmt"
	"strings"
)

// Limits shared by the naming rules. They follow RFC 1035/1123 and the
// Kubernetes label rules that Kuma users already know.
const (
	MaxLabelLength     = 63  // one DNS label, one label value, the name part of a label key
	MaxSubdomainLength = 253 // a DNS name or the prefix of a label key
)

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
func isAlnum(c byte) bool      { return isLowerAlnum(c) || c >= 'A' && c <= 'Z' }

// DNS1035Label checks s is a DNS-1035 label: at most 63 characters of lower
// case letters, digits and '-', starting with a letter and ending with a
// letter or digit. It returns the broken rule, or "" when s is valid.
// Service kinds use it for their names, because a service name ends up as a
// DNS label in generated hostnames.
func DNS1035Label(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxLabelLength {
		return fmt.Sprintf("must be no more than %d characters", MaxLabelLength)
	}
	if !(s[0] >= 'a' && s[0] <= 'z') || !isLowerAlnum(s[len(s)-1]) || !allLowerAlnumDash(s) {
		return "must be a DNS-1035 label: lower case letters, digits and '-', starting with a letter and ending with a letter or digit (e.g. 'my-name' or 'abc-123')"
	}
	return ""
}

// DNS1123Label checks s is a DNS-1123 label: at most 63 characters of lower
// case letters, digits and '-', starting and ending with a letter or digit.
func DNS1123Label(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxLabelLength {
		return fmt.Sprintf("must be no more than %d characters", MaxLabelLength)
	}
	if !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) || !allLowerAlnumDash(s) {
		return "must be a DNS-1123 label: lower case letters, digits and '-', starting and ending with a letter or digit (e.g. 'my-name' or '123-abc')"
	}
	return ""
}

// DNS1123Subdomain checks s is a lower case RFC 1123 DNS name: at most 253
// characters in all, dot-separated labels of 1 to 63 characters of lower case
// letters, digits and '-', each starting and ending with a letter or digit.
// Unlike the Kubernetes check of the same name it also enforces the 63
// character limit on each label.
func DNS1123Subdomain(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxSubdomainLength {
		return fmt.Sprintf("must be no more than %d characters", MaxSubdomainLength)
	}
	// Walk the labels without splitting: hostnames are checked on every
	// render, so this stays free of allocations.
	for rest := s; ; {
		label, tail, more := strings.Cut(rest, ".")
		if label == "" || len(label) > MaxLabelLength || !isLowerAlnum(label[0]) || !isLowerAlnum(label[len(label)-1]) || !allLowerAlnumDash(label) {
			return "must be a lower case RFC 1123 DNS name: dot-separated labels of 1 to 63 lower case letters, digits and '-', each starting and ending with a letter or digit (e.g. 'example.com')"
		}
		if !more {
			return ""
		}
		rest = tail
	}
}

func allLowerAlnumDash(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLowerAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// LabelKey checks k is a qualified label key: an optional DNS-1123 subdomain
// prefix and '/', then a name of at most 63 characters of letters, digits,
// '-', '_' and '.', starting and ending with a letter or digit.
func LabelKey(k string) string {
	name := k
	if i := strings.LastIndexByte(k, '/'); i >= 0 {
		prefix := k[:i]
		name = k[i+1:]
		if msg := DNS1123Subdomain(prefix); msg != "" {
			return "prefix " + msg
		}
	}
	if name == "" {
		return "name part must not be empty"
	}
	if len(name) > MaxLabelLength {
		return fmt.Sprintf("name part must be no more than %d characters", MaxLabelLength)
	}
	if !labelChars(name) {
		return "name part must consist of letters, digits, '-', '_' or '.', starting and ending with a letter or digit (e.g. 'app' or 'kuma.io/zone')"
	}
	return ""
}

// LabelValue checks v is a valid label value: empty, or at most 63
// characters of letters, digits, '-', '_' and '.', starting and ending with a
// letter or digit.
func LabelValue(v string) string {
	if v == "" {
		return ""
	}
	if len(v) > MaxLabelLength {
		return fmt.Sprintf("must be no more than %d characters", MaxLabelLength)
	}
	if !labelChars(v) {
		return "must consist of letters, digits, '-', '_' or '.', starting and ending with a letter or digit (e.g. 'backend' or 'v1.2')"
	}
	return ""
}

// TagValue checks v is a valid Dataplane tag value: 1 to 253 characters of
// letters, digits, '-', '_', '.' and ':' (Kuma's tag alphabet). Tags are
// longer than label values because kuma.io/service values built from
// Kubernetes names (name_namespace_svc_port) often pass 63 characters.
func TagValue(v string) string {
	if v == "" {
		return "must not be empty"
	}
	if len(v) > MaxSubdomainLength {
		return fmt.Sprintf("must be no more than %d characters", MaxSubdomainLength)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' && c != ':' {
			return fmt.Sprintf("must consist of letters, digits, '-', '_', '.' or ':', got %q at offset %d", c, i)
		}
	}
	return ""
}

func labelChars(s string) bool {
	if !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// Port checks p is a TCP/UDP port number, 1 to 65535.
func Port(p int) string {
	if p < 1 || p > 65535 {
		return fmt.Sprintf("must be a port number between 1 and 65535, got %d", p)
	}
	return ""
}

// OneOf checks v is one of allowed, and names them all when it is not.
func OneOf(v string, allowed ...string) string {
	for _, a := range allowed {
		if v == a {
			return ""
		}
	}
	return fmt.Sprintf("must be one of %s, got %q", quoteList(allowed), v)
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// Check records a violation at p when msg (the result of a rule above) is
// not empty. It keeps call sites to one line:
//
//	errs.Check(path.Field("name"), validate.DNS1035Label(name))
func (e *Errors) Check(p Path, msg string) {
	if msg != "" {
		e.Add(p, msg)
	}
}
