package resource

import (
	"encoding/json"
	"strconv"
)

// Every write encodes its spec, and every API answer, frozen entry and
// synced resource does again: encoding/json's reflection over a
// MeshService spec was 2-3% of a create's CPU. MarshalSpec writes the
// usual spec directly, byte for byte what json.Marshal writes
// (FuzzPlainMeshServiceSpec), and leaves the rarer selectors to
// encoding/json; MarshalStatus every service status
// (FuzzPlainServiceStatus).

// MarshalSpec encodes s as json.Marshal does ("{}" for nil).
func MarshalSpec(s Spec) ([]byte, error) {
	if ms, ok := s.(*MeshServiceSpec); ok && ms != nil && ms.plain() {
		return ms.appendJSON(make([]byte, 0, 192)), nil // a usual spec, written once
	}
	if s == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(s)
}

// plain reports whether appendJSON writes s: its selector, if any, is by
// dataplane tags or by reference (labels and seed 002's spelling go
// through encoding/json).
func (s *MeshServiceSpec) plain() bool {
	return s.Selector.DataplaneLabels == nil && s.Selector.Dataplane == nil
}

// appendJSON appends s as json.Marshal writes it (for a plain s).
func (s *MeshServiceSpec) appendJSON(b []byte) []byte {
	b = append(b, '{')
	comma := false
	field := func(name string) {
		if comma {
			b = append(b, ',')
		}
		comma = true
		b = append(b, name...)
	}
	// selector is omitzero: left out when every field is nil (an empty
	// but allocated tag map makes it "{}").
	if sel := s.Selector; sel.DataplaneTags != nil || sel.DataplaneRef != nil {
		field(`"selector":{`)
		inner := false
		if len(sel.DataplaneTags) > 0 {
			b = AppendLabels(append(b, `"dataplaneTags":`...), sel.DataplaneTags)
			inner = true
		}
		if r := sel.DataplaneRef; r != nil {
			if inner {
				b = append(b, ',')
			}
			b = AppendJSONString(append(b, `"dataplaneRef":{"name":`...), r.Name)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if len(s.Ports) > 0 {
		field(`"ports":[`)
		for i, p := range s.Ports {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			if p.Name != "" {
				b = append(AppendJSONString(append(b, `"name":`...), p.Name), ',')
			}
			b = strconv.AppendInt(append(b, `"port":`...), int64(p.Port), 10)
			if t := p.TargetPort; t != nil {
				b = append(b, `,"targetPort":`...)
				if t.IsName {
					b = AppendJSONString(b, t.String)
				} else {
					b = strconv.AppendInt(b, int64(t.Int), 10)
				}
			}
			if p.AppProtocol != "" {
				b = AppendJSONString(append(b, `,"appProtocol":`...), p.AppProtocol)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(s.Identities) > 0 {
		field(`"identities":[`)
		for i, id := range s.Identities {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(append(b, `{"type":`...), id.Type)
			b = AppendJSONString(append(b, `,"value":`...), id.Value)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if s.State != "" {
		field(`"state":`)
		b = AppendJSONString(b, s.State)
	}
	if e := s.Export; e != nil {
		field(`"export":{"mode":`)
		b = append(AppendJSONString(b, e.Mode), '}')
	}
	return append(b, '}')
}

// MarshalStatus encodes s as json.Marshal does: the status of every
// service kind is written directly (FuzzPlainServiceStatus), any other
// through encoding/json.
func MarshalStatus(s Status) ([]byte, error) {
	if ss, ok := s.(*ServiceStatus); ok && ss != nil {
		return ss.appendJSON(make([]byte, 0, 192)), nil // a named service's, written once
	}
	return json.Marshal(s)
}

// appendJSON appends s as json.Marshal writes it.
func (s *ServiceStatus) appendJSON(b []byte) []byte {
	b = append(b, '{')
	comma := false
	list := func(name string, n int, each func(i int)) {
		if n == 0 {
			return
		}
		if comma {
			b = append(b, ',')
		}
		comma = true
		b = append(b, name...)
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			each(i)
		}
		b = append(b, ']')
	}
	list(`"addresses":[`, len(s.Addresses), func(i int) {
		a := &s.Addresses[i]
		b = AppendJSONString(append(b, `{"hostname":`...), a.Hostname)
		b = AppendJSONString(append(b, `,"status":`...), a.Status)
		b = AppendJSONString(append(b, `,"origin":{"kind":`...), a.Origin.Kind)
		b = AppendJSONString(append(b, `,"name":`...), a.Origin.Name)
		b = append(b, '}')
		if a.Reason != "" {
			b = AppendJSONString(append(b, `,"reason":`...), a.Reason)
		}
		b = append(b, '}')
	})
	list(`"vips":[`, len(s.VIPs), func(i int) {
		v := &s.VIPs[i]
		b = AppendJSONString(append(b, `{"ip":`...), v.IP)
		b = AppendJSONString(append(b, `,"type":`...), v.Type)
		if v.Hostname != "" {
			b = AppendJSONString(append(b, `,"hostname":`...), v.Hostname)
		}
		b = append(b, '}')
	})
	list(`"conditions":[`, len(s.Conditions), func(i int) {
		c := &s.Conditions[i]
		b = AppendJSONString(append(b, `{"type":`...), c.Type)
		b = AppendJSONString(append(b, `,"status":`...), c.Status)
		if c.Reason != "" {
			b = AppendJSONString(append(b, `,"reason":`...), c.Reason)
		}
		if c.Message != "" {
			b = AppendJSONString(append(b, `,"message":`...), c.Message)
		}
		b = append(b, '}')
	})
	return append(b, '}')
}
