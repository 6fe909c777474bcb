package resource

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
	"unique"
)

// Decoded objects repeat the same strings many times over: every service
// has kuma.io/display-name, kuma.io/origin, kuma.io/zone and kuma.io/mesh
// label keys, and mostly the same values for three of them; every address
// says Available and HostnameGenerator. Interning them with the unique
// package keeps one copy of each in memory, which matters for a cache that
// holds every resource (ARCHITECTURE.md section 9: memory per service).
// unique's handles are weak, so strings nobody uses any more are freed.

func intern(s string) string { return unique.Make(s).Value() }

// UnmarshalLabels decodes stored labels, interning keys and values. A
// display name equal to the resource's name shares name's string.
func UnmarshalLabels(data []byte, name string) (map[string]string, error) {
	if out, ok := plainLabels(data, name); ok {
		return out, nil
	}
	var raw map[string]string
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch {
		case k == LabelDisplayName && v == name:
			v = name
		default:
			v = intern(v)
		}
		out[intern(k)] = v
	}
	return out, nil
}

// plainLabels decodes what json.Marshal writes for labels in the usual
// case: an object of strings without escapes or spaces, such as
// {"kuma.io/origin":"zone","team":"a"}. It reports false for anything
// else, which UnmarshalLabels decodes with encoding/json. Every start
// decodes the labels of every stored resource, and encoding/json (a map
// decoded by reflection, then copied into the interned one) took 4 µs
// per resource, 4% of a first start's CPU at 100,000 services.
func plainLabels(data []byte, name string) (map[string]string, bool) {
	if len(data) < 2 {
		return nil, false
	}
	out := make(map[string]string, bytes.Count(data, []byte(`":"`)))
	p := plainJSON{b: data, ok: true}
	p.object(func(k []byte) {
		key := intern(string(k))
		if v := p.raw(); key == LabelDisplayName && string(v) == name {
			out[key] = name
		} else {
			out[key] = intern(string(v))
		}
	})
	if !p.ok || len(p.b) != 0 {
		return nil, false
	}
	if len(out) == 0 {
		return nil, true
	}
	return out, true
}

// plainString reads a JSON string at the start of b that holds no escape,
// no control character and only valid UTF-8 (so that it decodes to its
// bytes), and returns its contents and what follows it.
func plainString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			if !utf8.Valid(b[1:i]) {
				return nil, nil, false
			}
			return b[1:i], b[i+1:], true
		case c == '\\' || c < 0x20:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// internStatus interns the repeated strings of a service status.
func (s *ServiceStatus) intern() {
	for i := range s.Addresses {
		a := &s.Addresses[i]
		a.Status = intern(a.Status)
		a.Origin.Kind = intern(a.Origin.Kind)
		a.Origin.Name = intern(a.Origin.Name)
	}
	for i := range s.VIPs {
		s.VIPs[i].Type = intern(s.VIPs[i].Type)
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Type, c.Status, c.Reason = intern(c.Type), intern(c.Status), intern(c.Reason)
	}
}
