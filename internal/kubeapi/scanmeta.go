package kubeapi

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Meta is the identity of an object as Follow and a write's caller need
// it: name, namespace and resourceVersion.
type Meta struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace"`
	ResourceVersion string `json:"resourceVersion"`
}

// MetaOf reads the metadata's name, namespace and resourceVersion of an
// object's JSON, exactly as json.Unmarshal into
// struct{ Metadata Meta `json:"metadata"` } does, errors included. Every
// watch event and every write's response is read for them, and
// json.Unmarshal, which decodes the whole object (its managedFields, spec
// and status) to find them, was a twentieth of the CPU of a first naming
// of 10,000 Services. MetaOf scans instead, and leaves to json.Unmarshal
// what it does not read the same way for sure: invalid JSON, escapes or
// non-ASCII in the keys it looks at, a key that matches one of the three
// only case-insensitively (json.Unmarshal would take it), and a value of
// theirs that is not a plain string.
func MetaOf(raw []byte) (Meta, error) {
	if m, ok := scanMeta(raw); ok {
		return m, nil
	}
	var v struct {
		Metadata Meta `json:"metadata"`
	}
	err := json.Unmarshal(raw, &v)
	return v.Metadata, err
}

// scanMeta is MetaOf's scan; ok is false when json.Unmarshal must decide.
func scanMeta(raw []byte) (m Meta, ok bool) {
	s := metaScanner{b: raw}
	s.space()
	if !s.object(func(key []byte) bool {
		if !s.wanted(key, "metadata") {
			return s.value(0)
		}
		if s.literal("null") {
			return true
		}
		return s.object(func(key []byte) bool {
			var field *string
			switch {
			case s.wanted(key, "name"):
				field = &m.Name
			case s.wanted(key, "namespace"):
				field = &m.Namespace
			case s.wanted(key, "resourceVersion"):
				field = &m.ResourceVersion
			default:
				return s.value(1)
			}
			v, ok := s.plainString()
			if ok {
				*field = v
			}
			return ok
		})
	}) {
		return Meta{}, false
	}
	s.space()
	return m, !s.failed && s.i == len(s.b)
}

// metaScanner walks JSON; any method that returns false has found what it
// leaves to json.Unmarshal.
type metaScanner struct {
	b      []byte
	i      int
	failed bool // a key was not plain: the scan is void
}

// maxMetaDepth bounds the nesting the scan follows; deeper is
// json.Unmarshal's.
const maxMetaDepth = 512

func (s *metaScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// wanted reports whether key is name exactly; a key that matches it only
// as json.Unmarshal matches keys (case-insensitively, with Unicode folds)
// or holds escapes or non-ASCII makes the scan fail.
func (s *metaScanner) wanted(key []byte, name string) bool {
	if string(key) == name {
		return true
	}
	if bytes.IndexByte(key, '\\') >= 0 || !ascii(key) || strings.EqualFold(string(key), name) {
		s.failed = true
	}
	return false
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// object scans an object, calling member with each key (raw, between the
// quotes) with the scanner at the value, which member must consume.
func (s *metaScanner) object(member func(key []byte) bool) bool {
	return s.list('{', '}', func() bool {
		start := s.i + 1
		if !s.str() {
			return false
		}
		key := s.b[start : s.i-1]
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		return member(key) && !s.failed
	})
}

// list scans open, elements separated by commas, and close; elem
// consumes one element, the scanner at its start.
func (s *metaScanner) list(open, close byte, elem func() bool) bool {
	if s.i >= len(s.b) || s.b[s.i] != open {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		return true
	}
	for {
		s.space()
		if !elem() {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case close:
			s.i++
			return true
		default:
			return false
		}
	}
}

// value skips one value at depth.
func (s *metaScanner) value(depth int) bool {
	if s.i >= len(s.b) || depth > maxMetaDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{':
		return s.object(func([]byte) bool { return s.value(depth + 1) })
	case c == '[':
		return s.list('[', ']', func() bool { return s.value(depth + 1) })
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *metaScanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// number skips a number as JSON's grammar has it.
func (s *metaScanner) number() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// str skips a string, checking its escapes and that it holds no control
// character.
func (s *metaScanner) str() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	for s.i++; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.i+4 >= len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				s.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// plainString reads a string value without escapes, whose bytes are its
// value (valid UTF-8); anything else fails the scan.
func (s *metaScanner) plainString() (string, bool) {
	start := s.i + 1
	if !s.str() {
		return "", false
	}
	v := s.b[start : s.i-1]
	if bytes.IndexByte(v, '\\') >= 0 || !ascii(v) {
		s.failed = true
		return "", false
	}
	return string(v), true
}
