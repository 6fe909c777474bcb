package resource

import (
	"encoding/json"
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
