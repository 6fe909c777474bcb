package hostname

import (
	"encoding/binary"
	"slices"
)

// labelSet is a set of labels in the compact form the engine keeps them
// in: one string of labels sorted by key, each written as the lengths of
// its key and value (two bytes each, little-endian: admission keeps both
// far shorter) followed by the key and the value, so that a lookup skips a
// label of another length without reading it.
//
// The engine holds the labels of every service. A Go map costs a few
// hundred bytes even with four entries, and a slice of pairs still costs an
// allocation per label; one string costs one, and the engine shares it
// between every service with the same labels (Engine.labels). Most
// services of a zone differ only in their names and the labels their names
// give (NameLabels: the display name, and a Kubernetes Service's name and
// namespace). A set leaves those out (named), so that those services share
// one string. Services have a handful of labels, so a lookup scans them.
type labelSet struct {
	packed string
	// named are the labels the set also holds that are not in packed:
	// those the service's name determines.
	named NameLabels
}

// labelSetOf returns the labels of m as a labelSet. A set made with the
// name of a service leaves out a display name that begins it; a
// selector's is made with name "". It does not keep m.
func labelSetOf(name string, m map[string]string) labelSet {
	var ls labelSet
	var packed []byte
	packed, ls.named = appendLabels(nil, name, m)
	ls.packed = string(packed)
	return ls
}

// appendLabels appends the packed form of the labels m of the service name
// to dst, without those name determines, and returns those. Admission
// bounds keys to 317 bytes and values to 63, well within two bytes each.
func appendLabels(dst []byte, name string, m map[string]string) (_ []byte, named NameLabels) {
	named = NameLabelsOf(name, m)
	var buf [8]string
	keys := buf[:0]
	for k := range m {
		if !named.Has(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := m[k]
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(k)))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(v)))
		dst = append(dst, k...)
		dst = append(dst, v...)
	}
	return dst, named
}

// next returns the first label of packed and the rest.
func next(packed string) (key, value, rest string) {
	kl := int(packed[0]) | int(packed[1])<<8
	vl := int(packed[2]) | int(packed[3])<<8
	rest = packed[4:]
	return rest[:kl], rest[kl : kl+vl], rest[kl+vl:]
}

// get returns the value of key in the labels of the service name and
// whether they have it.
func (ls labelSet) get(name, key string) (string, bool) {
	if v, ok := ls.named.Get(name, key); ok {
		return v, true
	}
	for rest := ls.packed; rest != ""; {
		kl := int(rest[0]) | int(rest[1])<<8
		vl := int(rest[2]) | int(rest[3])<<8
		if kl == len(key) && rest[4:4+kl] == key {
			return rest[4+kl : 4+kl+vl], true
		}
		rest = rest[4+kl+vl:]
	}
	return "", false
}

// equalMap reports whether the set holds exactly the labels of m, for the
// service name.
func (ls labelSet) equalMap(name string, m map[string]string) bool {
	n := 0
	for _, k := range [...]string{labelDisplayName, labelServiceName, labelNamespace} {
		if want, ok := ls.named.Get(name, k); ok {
			if v, ok := m[k]; !ok || v != want {
				return false
			}
			n++
		}
	}
	for rest := ls.packed; rest != ""; {
		var k, v string
		k, v, rest = next(rest)
		if mv, ok := m[k]; !ok || mv != v {
			return false
		}
		n++
	}
	return n == len(m)
}

// contains reports whether every label of the selector sel is in the
// labels of the service name, with the same value. Both are sorted, so
// one pass over each decides.
func (ls labelSet) contains(name string, sel labelSet) bool {
	have := ls.packed
	for rest := sel.packed; rest != ""; {
		var k, want string
		k, want, rest = next(rest)
		if v, ok := ls.named.Get(name, k); ok {
			if want != v {
				return false
			}
			continue
		}
		for {
			if have == "" {
				return false
			}
			var hk, hv string
			hk, hv, have = next(have)
			if hk == k {
				if hv != want {
					return false
				}
				break
			}
			if hk > k {
				return false
			}
		}
	}
	return true
}

// sharedLabels holds one copy of each distinct label string the engine's
// services use, counted by the services that use it.
type sharedLabels struct {
	sets map[string]*sharedSet
	buf  []byte // scratch for hold
}

type sharedSet struct {
	packed string
	refs   int
}

func newSharedLabels() *sharedLabels { return &sharedLabels{sets: map[string]*sharedSet{}} }

// hold returns the labels m of the service name as a set whose string is
// shared; a new string is made only for labels no service has yet.
func (s *sharedLabels) hold(name string, m map[string]string) labelSet {
	var ls labelSet
	s.buf, ls.named = appendLabels(s.buf[:0], name, m)
	if len(s.buf) == 0 {
		return ls
	}
	set := s.sets[string(s.buf)]
	if set == nil {
		set = &sharedSet{packed: string(s.buf)}
		s.sets[set.packed] = set
	}
	set.refs++
	ls.packed = set.packed
	return ls
}

// release gives back a set hold returned.
func (s *sharedLabels) release(ls labelSet) {
	if ls.packed == "" {
		return
	}
	if set := s.sets[ls.packed]; set != nil {
		if set.refs--; set.refs == 0 {
			delete(s.sets, ls.packed)
		}
	}
}
