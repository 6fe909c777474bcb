package hostname

import (
	"fmt"
	"strings"
)

// Source says where a name a service claims comes from.
type Source uint8

const (
	// Generated names are rendered by a HostnameGenerator (seeds 000, 001).
	Generated Source = iota
	// InternalVIP names are the values of the InternalVIP matches of a
	// MeshExternalService (seed 003), written by hand in its spec.
	InternalVIP
	// ServiceTag names are <tag>.<domain> for each ServiceTag identity of a
	// MeshService (seed 004), e.g. frontend_default_svc_80.mesh.
	ServiceTag
	// ServiceTagAlias names are the DNS-compliant aliases of a service-tag
	// name (seed 004), e.g. frontend-default-svc-80.mesh.
	ServiceTagAlias
)

func (s Source) String() string {
	switch s {
	case Generated:
		return "Generated"
	case InternalVIP:
		return "InternalVIP"
	case ServiceTag:
		return "ServiceTag"
	case ServiceTagAlias:
		return "ServiceTagAlias"
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// rank orders the sources of the claims on one name: InternalVIP values
// and generated names first (between them the older claim holds the name,
// see claimList.holder), then service-tag names, then their aliases, which
// the name a generator or a MeshExternalService chose always beats (a tag
// is the proxies' identity, not a name someone picked).
func (s Source) rank() int {
	switch s {
	case InternalVIP:
		return 0
	case Generated:
		return 1
	case ServiceTag:
		return 2
	default:
		return 3
	}
}

// isTag reports whether s is a service-tag name or an alias of one.
func (s Source) isTag() bool { return s == ServiceTag || s == ServiceTagAlias }

// tagSource is the source of a TagName.
func tagSource(n TagName) Source {
	if n.Alias {
		return ServiceTagAlias
	}
	return ServiceTag
}

// TagName is one name a service tag gives its MeshService.
type TagName struct {
	// Host is the name, lower case, without the final dot.
	Host string
	// Tag is the service tag it comes from.
	Tag string
	// Alias is set for a DNS-compliant alias of the tag's own name.
	Alias bool
}

// ServiceTagNames returns the names the service tags of a MeshService
// answer to under domain (seed 004), each once: for every tag, lower case,
// <tag>.<domain>; then for every tag its aliases, the tag with '_' and '.'
// replaced by '-', and with '_' replaced by '.', where they differ from
// the tag. Every tag's own name comes before any alias, so that a name
// that is one tag's alias and another's own name is claimed as the
// latter. An empty domain gives no names.
func ServiceTagNames(tags []string, domain string) []TagName {
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	if domain == "" || len(tags) == 0 {
		return nil
	}
	var out []TagName
	add := func(n TagName) {
		for _, o := range out {
			if o.Host == n.Host {
				return
			}
		}
		out = append(out, n)
	}
	for _, tag := range tags {
		if tag != "" {
			add(TagName{Host: strings.ToLower(tag) + "." + domain, Tag: tag})
		}
	}
	for _, tag := range tags {
		lower := strings.ToLower(tag)
		if lower == "" {
			continue
		}
		for _, alias := range []string{dashes.Replace(lower), strings.ReplaceAll(lower, "_", ".")} {
			if alias != lower {
				add(TagName{Host: alias + "." + domain, Tag: tag, Alias: true})
			}
		}
	}
	return out
}

var dashes = strings.NewReplacer("_", "-", ".", "-")

// checkTagName says why a service-tag name cannot be a DNS name, or ""
// when it can: labels of 1 to 63 bytes of lower case letters, digits, '-'
// and '_' (the tag keeps its underscores, seed 004), at most 253 bytes in
// all (RFC 1035).
func checkTagName(name string) string {
	if len(name) > 253 {
		return fmt.Sprintf("%d bytes, more than 253", len(name))
	}
	for rest := name; ; {
		label, tail, more := strings.Cut(rest, ".")
		switch {
		case label == "":
			return "an empty label"
		case len(label) > 63:
			return fmt.Sprintf("the label %q has %d bytes, more than 63", label, len(label))
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("the label %q has the character %q; a name has only lower case letters, digits, '-' and '_'", label, c)
			}
		}
		if !more {
			return ""
		}
		rest = tail
	}
}
