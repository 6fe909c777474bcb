package resource

import "bytes"

// Stored resources are decoded at every start (the cache lists the store)
// and again whenever a frozen one is read. For MeshService, the kind there
// are most of, encoding/json's reflection took 5 µs a spec, about 5% of a
// first start's CPU at 100,000 services. plainMeshServiceSpec reads the
// usual form of a stored spec directly and leaves anything else to
// encoding/json, whose result it must equal (FuzzPlainMeshServiceSpec).

// plainMeshServiceSpec decodes data, as json.Marshal writes a
// MeshServiceSpec, when it uses only the usual fields (selector by
// dataplane tags or reference, ports, identities, state, export), holds no
// whitespace, escape, null, repeated key or number outside -999999999 to
// 999999999, and all its strings are valid UTF-8. It reports false for
// anything else.
func plainMeshServiceSpec(data []byte) (*MeshServiceSpec, bool) {
	p := plainJSON{b: data, ok: true}
	s := p.meshServiceSpec()
	if !p.ok || len(p.b) != 0 {
		return nil, false
	}
	return s, true
}

// plainDocument decodes a document as DecodePartial would, when it is a
// MeshService in the plain form plainMeshServiceSpec reads (what
// json.Marshal writes, as kumactl and most clients send it): type, mesh,
// name, labels and spec in any order and nothing else, trailing
// whitespace allowed. It reports false for anything else, which
// DecodePartial decodes strictly (FuzzPlainDocument holds the two equal).
// The API decodes every PUT's body: this is a tenth of a create's CPU.
func plainDocument(data []byte) (*Object, bool) {
	p := plainJSON{b: bytes.TrimRight(data, " \t\r\n"), ok: true}
	obj := &Object{}
	var seen [5]bool
	p.object(func(key []byte) {
		switch string(key) {
		case "type":
			p.once(&seen[4])
			if string(p.raw()) != string(MeshService) {
				p.ok = false
			}
			obj.Kind = MeshService
		case "mesh":
			p.once(&seen[0])
			obj.Mesh = p.str()
		case "name":
			p.once(&seen[1])
			obj.Name = p.str()
		case "labels":
			p.once(&seen[2])
			obj.Labels = p.stringMap()
		case "spec":
			p.once(&seen[3])
			obj.Spec = p.meshServiceSpec()
		default:
			p.ok = false
		}
	})
	if !p.ok || len(p.b) != 0 || obj.Kind == "" {
		return nil, false
	}
	if obj.Spec == nil {
		obj.Spec = &MeshServiceSpec{}
	}
	return obj, true
}

// meshServiceSpec reads a MeshServiceSpec (plainMeshServiceSpec).
func (p *plainJSON) meshServiceSpec() *MeshServiceSpec {
	s := &MeshServiceSpec{}
	var seen [5]bool
	p.object(func(key []byte) {
		switch string(key) {
		case "selector":
			p.once(&seen[0])
			p.selector(&s.Selector)
		case "ports":
			p.once(&seen[1])
			s.Ports = []Port{}
			p.array(func() {
				s.Ports = append(s.Ports, p.port())
			})
		case "identities":
			p.once(&seen[2])
			s.Identities = []Identity{}
			p.array(func() {
				var id Identity
				p.fields(identityFields, &id.Type, &id.Value)
				s.Identities = append(s.Identities, id)
			})
		case "state":
			p.once(&seen[3])
			s.State = p.str()
		case "export":
			p.once(&seen[4])
			s.Export = &Export{Mode: p.onlyString("mode")}
		default:
			p.ok = false
		}
	})
	return s
}

// PlainSpec decodes a spec of kind k in the plain form json.Marshal
// writes, when it is one the plain reader knows (plainMeshServiceSpec):
// to what the strict decoder makes of it, since such a spec has no
// unknown or repeated field and only exact field names. It reports false
// for anything else, which the caller decodes strictly. Zone sync decodes
// every synced MeshService so.
func PlainSpec(k Kind, data []byte) (Spec, bool) {
	if k != MeshService {
		return nil, false
	}
	s, ok := plainMeshServiceSpec(data)
	if !ok {
		return nil, false
	}
	return s, true
}

func (p *plainJSON) selector(sel *MeshServiceSelector) {
	var seen [2]bool
	p.object(func(key []byte) {
		switch string(key) {
		case "dataplaneTags":
			p.once(&seen[0])
			sel.DataplaneTags = p.stringMap()
		case "dataplaneRef":
			p.once(&seen[1])
			sel.DataplaneRef = &DataplaneRef{Name: p.onlyString("name")}
		default:
			p.ok = false
		}
	})
}

func (p *plainJSON) port() Port {
	var port Port
	var seen [4]bool
	p.object(func(key []byte) {
		switch string(key) {
		case "name":
			p.once(&seen[0])
			// An empty name is refused by the strict decoder.
			if port.Name = p.str(); port.Name == "" {
				p.ok = false
			}
		case "port":
			p.once(&seen[1])
			port.Port = p.int()
		case "targetPort":
			p.once(&seen[2])
			if len(p.b) > 0 && p.b[0] == '"' {
				port.TargetPort = &IntOrString{String: p.str(), IsName: true}
			} else {
				port.TargetPort = &IntOrString{Int: p.int()}
			}
		case "appProtocol":
			p.once(&seen[3])
			port.AppProtocol = p.str()
		default:
			p.ok = false
		}
	})
	return port
}

// plainJSON reads the plain form of JSON that plainMeshServiceSpec
// accepts; ok turns false at the first thing outside it, after which
// every read returns at once.
type plainJSON struct {
	b  []byte
	ok bool
}

// once fails a key seen before (encoding/json would merge or overwrite).
func (p *plainJSON) once(seen *bool) {
	if *seen {
		p.ok = false
	}
	*seen = true
}

func (p *plainJSON) next(c byte) bool {
	if p.ok && len(p.b) > 0 && p.b[0] == c {
		p.b = p.b[1:]
		return true
	}
	return false
}

func (p *plainJSON) str() string { return string(p.raw()) }

// onlyString reads an object whose only member is the string named key
// ({"mode":"All"}, {"name":"web"}); any other member is not plain.
func (p *plainJSON) onlyString(key string) string {
	var v string
	var seen bool
	p.object(func(k []byte) {
		if string(k) != key {
			p.ok = false
			return
		}
		p.once(&seen)
		v = p.str()
	})
	return v
}

// raw reads a string and returns its bytes (plainString), which are
// data's own: for callers that look them up or intern them rather than
// keep them.
func (p *plainJSON) raw() []byte {
	if !p.ok {
		return nil
	}
	s, rest, ok := plainString(p.b)
	if !ok {
		p.ok = false
		return nil
	}
	p.b = rest
	return s
}

// int reads an integer of at most nine digits, in JSON's form (no
// leading zero, no fraction or exponent).
func (p *plainJSON) int() int {
	if !p.ok {
		return 0
	}
	i, neg := 0, false
	if len(p.b) > 0 && p.b[0] == '-' {
		neg, i = true, 1
	}
	n, digits := 0, 0
	for ; i < len(p.b) && p.b[i] >= '0' && p.b[i] <= '9'; i++ {
		n = n*10 + int(p.b[i]-'0')
		digits++
	}
	switch {
	case digits == 0 || digits > 9,
		digits > 1 && p.b[i-digits] == '0',
		i < len(p.b) && (p.b[i] == '.' || p.b[i] == 'e' || p.b[i] == 'E'):
		p.ok = false
		return 0
	}
	p.b = p.b[i:]
	if neg {
		return -n
	}
	return n
}

// stringMap reads an object of strings into a new map; a repeated key
// fails (encoding/json would keep the last).
func (p *plainJSON) stringMap() map[string]string {
	m := map[string]string{}
	p.object(func(k []byte) {
		if _, dup := m[string(k)]; dup {
			p.ok = false
		}
		m[string(k)] = p.str()
	})
	return m
}

// object reads an object, calling field with each key (data's own bytes)
// with the reader at its value, which field must read.
func (p *plainJSON) object(field func(key []byte)) {
	if !p.next('{') {
		p.ok = false
		return
	}
	if p.next('}') {
		return
	}
	for p.ok {
		key := p.raw()
		if !p.next(':') {
			p.ok = false
			return
		}
		field(key)
		if p.next('}') {
			return
		}
		if !p.next(',') {
			p.ok = false
		}
	}
}

// array reads an array, calling elem with the reader at each element,
// which elem must read.
func (p *plainJSON) array(elem func()) {
	if !p.next('[') {
		p.ok = false
		return
	}
	if p.next(']') {
		return
	}
	for p.ok {
		elem()
		if p.next(']') {
			return
		}
		if !p.next(',') {
			p.ok = false
		}
	}
}

// plainServiceStatus decodes data, as json.Marshal writes a ServiceStatus
// (addresses, VIPs, conditions), in the plain form plainMeshServiceSpec
// reads; it reports false for anything else, which encoding/json decodes
// (FuzzPlainServiceStatus holds the two equal). A frozen service is
// thawed with its status whenever it is read decoded: on a global, whose
// streams and inventories read every zone's services, encoding/json's
// reflection over the status was a seventh of its CPU in an initial sync.
func plainServiceStatus(data []byte) (*ServiceStatus, bool) {
	p := plainJSON{b: data, ok: true}
	s := &ServiceStatus{}
	var seen [3]bool
	p.object(func(key []byte) {
		switch string(key) {
		case "addresses":
			p.once(&seen[0])
			s.Addresses = []Address{}
			p.array(func() { s.Addresses = append(s.Addresses, p.address()) })
		case "vips":
			p.once(&seen[1])
			s.VIPs = []VIP{}
			p.array(func() { s.VIPs = append(s.VIPs, p.vip()) })
		case "conditions":
			p.once(&seen[2])
			s.Conditions = []Condition{}
			p.array(func() { s.Conditions = append(s.Conditions, p.condition()) })
		default:
			p.ok = false
		}
	})
	if !p.ok || len(p.b) != 0 {
		return nil, false
	}
	return s, true
}

// fields reads an object whose members are all strings named in names
// (at most four), each at most once, into the pointer of into at the
// same index; anything else is not plain.
func (p *plainJSON) fields(names []string, into ...*string) {
	var seen [4]bool
	p.object(func(key []byte) {
		for i, n := range names {
			if string(key) == n {
				p.once(&seen[i])
				*into[i] = p.str()
				return
			}
		}
		p.ok = false
	})
}

var (
	identityFields  = []string{"type", "value"}
	originFields    = []string{"kind", "name"}
	vipFields       = []string{"ip", "type", "hostname"}
	conditionFields = []string{"type", "status", "reason", "message"}
)

func (p *plainJSON) address() Address {
	var a Address
	var seen [4]bool
	p.object(func(key []byte) {
		switch string(key) {
		case "hostname":
			p.once(&seen[0])
			a.Hostname = p.str()
		case "status":
			p.once(&seen[1])
			a.Status = p.str()
		case "reason":
			p.once(&seen[2])
			a.Reason = p.str()
		case "origin":
			p.once(&seen[3])
			p.fields(originFields, &a.Origin.Kind, &a.Origin.Name)
		default:
			p.ok = false
		}
	})
	return a
}

func (p *plainJSON) vip() VIP {
	var v VIP
	p.fields(vipFields, &v.IP, &v.Type, &v.Hostname)
	return v
}

func (p *plainJSON) condition() Condition {
	var c Condition
	p.fields(conditionFields, &c.Type, &c.Status, &c.Reason, &c.Message)
	return c
}
