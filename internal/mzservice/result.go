package mzservice

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
)

// Bounds on what a PortsConsistent message spells out: a selector may
// match thousands of services.
const (
	maxListedPorts    = 5
	maxListedServices = 3
)

// Result is what the engine computes for the status of one
// MeshMultiZoneService. Empty lists are nil.
type Result struct {
	// MeshServices are the matched services, sorted by name (the display
	// name), namespace and zone.
	MeshServices []resource.MeshServiceRef
	// Zones are the zones of the matched services, sorted, each once.
	Zones []resource.ZoneRef
	// Ports are the declared ports, else those common to every matched
	// service, sorted by number and protocol.
	Ports []resource.Port
	// Conditions are MeshServicesMatched, then PortsConsistent while a
	// port is left out.
	Conditions []resource.Condition
}

// ConditionTypes are the condition types the engine decides: Apply replaces
// them and leaves any other.
var ConditionTypes = []string{resource.ConditionMeshServicesMatched, resource.ConditionPortsConsistent}

// Apply writes r into st: meshServices, zones, ports and the conditions of
// ConditionTypes, which go after the others (as a status patch stores
// them); the others keep their order. It reports whether st changed: the
// order of conditions alone is no change.
func (r Result) Apply(st *resource.MultiZoneServiceStatus) bool {
	owned := func(c resource.Condition) bool { return slices.Contains(ConditionTypes, c.Type) }
	var ours []resource.Condition
	for _, c := range st.Conditions {
		if owned(c) {
			ours = append(ours, c)
		}
	}
	if slices.Equal(st.MeshServices, r.MeshServices) && slices.Equal(st.Zones, r.Zones) &&
		slices.EqualFunc(st.Ports, r.Ports, samePort) && slices.Equal(ours, r.Conditions) {
		return false
	}
	conds := append(slices.DeleteFunc(slices.Clone(st.Conditions), owned), r.Conditions...)
	if len(conds) == 0 {
		conds = nil
	}
	st.MeshServices = slices.Clone(r.MeshServices)
	st.Zones = slices.Clone(r.Zones)
	st.Ports = slices.Clone(r.Ports)
	st.Conditions = conds
	return true
}

func samePort(a, b resource.Port) bool {
	return a.Name == b.Name && a.Port == b.Port && a.AppProtocol == b.AppProtocol && a.TargetPort == nil && b.TargetPort == nil
}

// member is what a status shows of one matched MeshService.
type member struct {
	// name is the resource's name; display is its display name.
	name, display, namespace, zone string
	// ports are packed (labels.go); equal sets are usually one string.
	ports string
}

func compareMembers(a, b *member) int {
	if c := strings.Compare(a.display, b.display); c != 0 {
		return c
	}
	if c := strings.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.zone, b.zone); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// build computes the status of a MeshMultiZoneService of mesh with the
// selector sel and the declared ports from the services it matches.
func build(mesh string, sel selector, declared []resource.Port, members []member) Result {
	var r Result
	// Sort indexes: members are large, and moving them costs more than
	// comparing them.
	order := make([]int32, len(members))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return compareMembers(&members[a], &members[b]) })
	var zones []string
	if len(members) > 0 {
		r.MeshServices = make([]resource.MeshServiceRef, len(members))
	}
	for i, j := range order {
		mb := &members[j]
		r.MeshServices[i] = resource.MeshServiceRef{Name: mb.display, Namespace: mb.namespace, Zone: mb.zone, Mesh: mesh}
		if mb.zone != "" && !slices.Contains(zones, mb.zone) {
			zones = append(zones, mb.zone)
		}
	}
	slices.Sort(zones)
	for _, z := range zones {
		r.Zones = append(r.Zones, resource.ZoneRef{Name: z})
	}
	r.Conditions = append(r.Conditions, matchedCondition(mesh, sel, len(members)))
	if len(declared) > 0 {
		r.Ports = slices.Clone(declared)
		return r
	}
	var left []port
	r.Ports, left = commonPorts(members)
	if len(left) > 0 {
		r.Conditions = append(r.Conditions, portsCondition(members, order, left))
	}
	return r
}

func matchedCondition(mesh string, sel selector, n int) resource.Condition {
	c := resource.Condition{Type: resource.ConditionMeshServicesMatched, Status: resource.ConditionTrue, Reason: resource.ReasonMatchesFound}
	switch {
	case n == 1:
		c.Message = fmt.Sprintf("1 MeshService of mesh %s matches", mesh)
		return c
	case n > 1:
		c.Message = fmt.Sprintf("%d MeshServices of mesh %s match", n, mesh)
		return c
	}
	c.Status, c.Reason = resource.ConditionFalse, resource.ReasonNoMatchesFound
	switch {
	case !sel.set:
		c.Message = "no MeshService can match: spec.selector.meshService is not set"
	case len(sel.pairs) == 0:
		c.Message = fmt.Sprintf("mesh %s has no MeshService (the empty selector matches every one)", mesh)
	default:
		c.Message = fmt.Sprintf("no MeshService of mesh %s matches the selector %s", mesh, sel)
	}
	return c
}

// String formats the selector as {key=value,...}.
func (s selector) String() string {
	parts := make([]string, len(s.pairs))
	for i, p := range s.pairs {
		parts[i] = p.k + "=" + p.v
	}
	return "{" + strings.Join(parts, ",") + "}"
}

type portKey struct {
	num   int
	proto string
}

// commonPorts returns the ports every member has (same number and
// protocol), named when every member names it alike, and the ports only
// some have; both sorted. It looks at each distinct set of ports once:
// the services a MeshMultiZoneService groups mostly have the same ports.
func commonPorts(members []member) (common []resource.Port, left []port) {
	if len(members) == 0 {
		return nil, nil
	}
	var sets []string
	for i := range members {
		if !slices.Contains(sets, members[i].ports) {
			sets = append(sets, members[i].ports)
		}
	}
	type tally struct {
		n        int // sets that have the port
		name     string
		sameName bool
	}
	seen := map[portKey]*tally{}
	var all, ps []port
	for _, set := range sets {
		ps = unpackPorts(ps[:0], set)
		for i, p := range ps {
			if i > 0 && comparePorts(ps[i-1], p) == 0 {
				continue // a repeat, stored under other rules: counts once
			}
			k := portKey{p.num, p.proto}
			t := seen[k]
			if t == nil {
				t = &tally{name: p.name, sameName: true}
				seen[k] = t
				all = append(all, port{num: p.num, proto: p.proto})
			}
			t.n++
			if p.name != t.name {
				t.sameName = false
			}
		}
	}
	slices.SortFunc(all, comparePorts)
	for _, p := range all {
		t := seen[portKey{p.num, p.proto}]
		if t.n < len(sets) {
			left = append(left, p)
			continue
		}
		cp := resource.Port{Port: p.num, AppProtocol: p.proto}
		if t.sameName {
			cp.Name = t.name
		}
		common = append(common, cp)
	}
	return common, left
}

// portsCondition says which ports are left out and which services lack
// them, taking members in order. For example:
//
//	ports not on every matched MeshService are left out: 6380/tcp is not on
//	redis-west (zone west); 80/http is not on b (zone west, which has
//	80/tcp), c and 2 more; and 3 more ports
func portsCondition(members []member, order []int32, left []port) resource.Condition {
	var items []string
	var ps []port
	for _, p := range left[:min(len(left), maxListedPorts)] {
		var lacking []string
		n := 0
		for _, j := range order {
			mb := &members[j]
			has, other := false, ""
			ps = unpackPorts(ps[:0], mb.ports)
			for _, q := range ps {
				if q.num == p.num {
					if q.proto == p.proto {
						has = true
					} else {
						other = q.String()
					}
				}
			}
			if has {
				continue
			}
			if n++; len(lacking) == maxListedServices {
				continue
			}
			var notes []string
			if mb.zone != "" {
				notes = append(notes, "zone "+mb.zone)
			}
			if other != "" {
				notes = append(notes, "which has "+other)
			}
			s := mb.name
			if len(notes) > 0 {
				s += " (" + strings.Join(notes, ", ") + ")"
			}
			lacking = append(lacking, s)
		}
		item := p.String() + " is not on " + strings.Join(lacking, ", ")
		if n > len(lacking) {
			item += fmt.Sprintf(" and %d more", n-len(lacking))
		}
		items = append(items, item)
	}
	if n := len(left) - maxListedPorts; n > 0 {
		items = append(items, fmt.Sprintf("and %d more ports", n))
	}
	return resource.Condition{Type: resource.ConditionPortsConsistent, Status: resource.ConditionFalse, Reason: resource.ReasonPortsDiffer,
		Message: "ports not on every matched MeshService are left out: " + strings.Join(items, "; ")}
}
