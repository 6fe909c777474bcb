package mzservice

import (
	"encoding/binary"
	"slices"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
)

// The engine keeps what it needs of each MeshService in one string: a Go
// map of labels costs a few hundred bytes even with four entries, and a
// slice of ports an allocation per service. The string holds the length of
// the packed labels (a uvarint), the packed labels, then the packed ports.
//
// Labels are packed as two bytes saying which labels the service's name
// determines and leaves out (resource.NameLabels, little-endian: the
// display name, which begins the name, and a Kubernetes Service's name and
// namespace), then each other label sorted by key: the key, as a uvarint
// below len(knownKeys) for one of knownKeys, else as the uvarint
// len(knownKeys)+len(key) followed by the key; then the value, as its
// length (uvarint) and bytes. The labels the control plane sets on every
// service thus cost two bytes and their value, and a service of a zone
// takes about 50 bytes.
//
// Ports are packed sorted by number then protocol, each as its number (four
// bytes, little-endian), the lengths of its protocol and name (one byte
// each: admission keeps them short) and the protocol and name.
//
// Equal packed strings are shared through a small cache of those seen
// last (dedup), so the services of a zone that differ only in their names
// (universal MeshServices synthesised from Dataplanes) hold one copy
// between them.

// knownKeys are the label keys packed as one byte. Their order is part of
// the packed form of a running engine only, never stored.
var knownKeys = []string{
	resource.LabelDisplayName, resource.LabelZone, resource.LabelOrigin, resource.LabelMesh,
	resource.LabelEnv, resource.LabelManagedBy, resource.LabelNamespace, resource.LabelServiceName,
	resource.LabelHeadless, resource.LabelExportMode,
}

// pair is one label, or one entry of a selector.
type pair struct{ k, v string }

// dedupMax bounds the strings a dedup remembers.
const dedupMax = 256

// dedup returns one shared copy of recently seen equal strings. It holds
// at most dedupMax of them and forgets an arbitrary one when full: a
// string in use stays alive through its users, so forgetting one costs
// only the sharing of later copies.
type dedup struct{ m map[string]string }

func (d *dedup) string(b []byte) string {
	if s, ok := d.m[string(b)]; ok {
		return s
	}
	if d.m == nil {
		d.m = make(map[string]string, dedupMax)
	}
	if len(d.m) >= dedupMax {
		for k := range d.m {
			delete(d.m, k)
			break
		}
	}
	s := string(b)
	d.m[s] = s
	return s
}

// packService returns what the engine keeps of the service name with labels
// m and ports, packed into buf[:0] and then made a string by d.
func packService(d *dedup, buf []byte, name string, m map[string]string, ports []resource.Port) (string, []byte) {
	b := appendLabels(buf[:0], name, m)
	// The labels' length goes first: pack the ports after the labels, then
	// move both up by the length's size.
	n := len(b)
	b = appendPorts(b, ports)
	var l [binary.MaxVarintLen64]byte
	ll := binary.PutUvarint(l[:], uint64(n))
	b = append(b, l[:ll]...)
	copy(b[ll:], b[:len(b)-ll])
	copy(b, l[:ll])
	return d.string(b), b
}

// splitService returns the packed labels and the packed ports of what
// packService returned.
func splitService(s string) (labels, ports string) {
	n, ll := uvarint(s)
	return s[ll : ll+int(n)], s[ll+int(n):]
}

// appendLabels appends the packed labels m of the service name to b.
func appendLabels(b []byte, name string, m map[string]string) []byte {
	n := resource.NameLabelsOf(name, m)
	var kbuf [8]string
	keys := kbuf[:0]
	for k := range m {
		if !n.Has(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b = append(b, byte(n), byte(n>>8))
	for _, k := range keys {
		if i := slices.Index(knownKeys, k); i >= 0 {
			b = binary.AppendUvarint(b, uint64(i))
		} else {
			b = binary.AppendUvarint(b, uint64(len(knownKeys)+len(k)))
			b = append(b, k...)
		}
		v := m[k]
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

// named returns the labels the name determines of packed labels.
func named(packed string) resource.NameLabels {
	return resource.NameLabels(packed[0]) | resource.NameLabels(packed[1])<<8
}

// nameKeys are the keys of the labels a name may determine.
var nameKeys = [...]string{resource.LabelDisplayName, resource.LabelServiceName, resource.LabelNamespace}

// nextLabel returns the first label of rest (packed labels after their
// first two bytes) and the rest after it.
func nextLabel(rest string) (k, v, after string) {
	x, n := uvarint(rest)
	rest = rest[n:]
	if x < uint64(len(knownKeys)) {
		k = knownKeys[x]
	} else {
		kl := int(x) - len(knownKeys)
		k, rest = rest[:kl], rest[kl:]
	}
	vl, n := uvarint(rest)
	rest = rest[n:]
	return k, rest[:vl], rest[vl:]
}

// uvarint decodes a uvarint the packers wrote at the start of s.
func uvarint(s string) (uint64, int) {
	var x uint64
	for i := 0; ; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<(7*i), i + 1
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
}

// label returns the value of the label key of the service name with the
// packed labels, and whether it has it.
func label(packed, name, key string) (string, bool) {
	if v, ok := named(packed).Get(name, key); ok {
		return v, true
	}
	for rest := packed[2:]; rest != ""; {
		var k, v string
		k, v, rest = nextLabel(rest)
		if k == key {
			return v, true
		}
	}
	return "", false
}

// contains reports whether the service name with the packed labels has
// every pair of sel, with equal values. A missing label never matches,
// even a wanted empty value (Kuma reads it as "" and matches: a fault we
// do not copy).
func contains(packed, name string, sel []pair) bool {
	for _, p := range sel {
		if v, ok := label(packed, name, p.k); !ok || v != p.v {
			return false
		}
	}
	return true
}

// port is one port of a MeshService as the engine reads it.
type port struct {
	num         int
	proto, name string
}

// appendPorts appends the packed ports to b. A port without a protocol
// is tcp, as admission stores it.
func appendPorts(b []byte, ports []resource.Port) []byte {
	var pbuf [4]port
	ps := pbuf[:0]
	for _, p := range ports {
		ps = append(ps, port{num: p.Port, proto: protocol(p.AppProtocol), name: p.Name})
	}
	slices.SortFunc(ps, comparePorts)
	for _, p := range ps {
		// Admission bounds both; values stored under other rules are cut
		// rather than misread.
		proto, name := p.proto[:min(len(p.proto), 255)], p.name[:min(len(p.name), 255)]
		b = binary.LittleEndian.AppendUint32(b, uint32(int32(p.num)))
		b = append(b, byte(len(proto)), byte(len(name)))
		b = append(b, proto...)
		b = append(b, name...)
	}
	return b
}

// unpackPorts appends the packed ports to dst.
func unpackPorts(dst []port, packed string) []port {
	for rest := packed; rest != ""; {
		num := int(int32(uint32(rest[0]) | uint32(rest[1])<<8 | uint32(rest[2])<<16 | uint32(rest[3])<<24))
		pl, nl := int(rest[4]), int(rest[5])
		rest = rest[6:]
		dst = append(dst, port{num: num, proto: rest[:pl], name: rest[pl : pl+nl]})
		rest = rest[pl+nl:]
	}
	return dst
}

// protocol returns a port's protocol as stored: lower case, tcp when
// left out.
func protocol(p string) string {
	if p == "" {
		return resource.ProtocolTCP
	}
	return strings.ToLower(p)
}

func comparePorts(a, b port) int {
	if a.num != b.num {
		return a.num - b.num
	}
	return strings.Compare(a.proto, b.proto)
}

func (p port) String() string { return strconv.Itoa(p.num) + "/" + p.proto }
