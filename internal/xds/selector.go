package xds

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
)

// selector is a proxy's reachableBackends: which services it is sent;
// or, for a ZoneIngress proxy, its name: the ingress table holds the
// listener of every ZoneIngress of the zone, and each gets its own. A nil
// selector selects every service of the mesh.
type selector struct {
	refs    []resource.BackendRef
	ingress string
}

// selectorOf reads the selection of a Dataplane (nil: everything) or a
// ZoneIngress.
func selectorOf(dp *resource.Object) *selector {
	if dp == nil {
		return nil
	}
	if dp.Kind == resource.ZoneIngress {
		return &selector{ingress: dp.Name}
	}
	spec, ok := dp.Spec.(*resource.DataplaneSpec)
	if !ok {
		return nil
	}
	tp := spec.Networking.TransparentProxying
	if tp == nil || tp.ReachableBackends == nil {
		return nil
	}
	return &selector{refs: slices.Clone(tp.ReachableBackends.Refs)}
}

// key is a text that two selectors share when they select the same way
// ("" for nil).
func (s *selector) key() string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	for _, r := range s.refs {
		fmt.Fprintf(&b, "%q %q %q %d", r.Kind, r.Name, r.Namespace, r.Port)
		for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
			fmt.Fprintf(&b, " %q=%q", k, r.Labels[k])
		}
		b.WriteByte(';')
	}
	return b.String()
}

func (s *selector) equal(o *selector) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.ingress == o.ingress && slices.EqualFunc(s.refs, o.refs, func(a, b resource.BackendRef) bool {
		return a.Kind == b.Kind && a.Name == b.Name && a.Namespace == b.Namespace && a.Port == b.Port && mapsEqual(a.Labels, b.Labels)
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// selects reports whether the proxy may reach the resource e, whose
// owner's labels are labels.
func (s *selector) selects(e *entry, labels map[string]string) bool {
	if s == nil {
		return true
	}
	if s.ingress != "" {
		return e.owner.Kind != resource.ZoneIngress || e.owner.Name == s.ingress
	}
	for _, r := range s.refs {
		if r.Kind != e.owner.Kind || (r.Port != 0 && r.Port != e.port) {
			continue
		}
		if isShared(e.owner) {
			return true // the listener the external services share on a port
		}
		if refers(r, e.owner, labels) {
			return true
		}
	}
	return false
}

// reaches reports whether the proxy may reach some port of the service
// k, whose labels are labels: its names are then in the proxy's DNS
// listener, as Kuma's data plane gets the names of its outbounds.
func (s *selector) reaches(k resource.Key, labels map[string]string) bool {
	if s == nil {
		return true
	}
	for _, r := range s.refs {
		if r.Kind == k.Kind && refers(r, k, labels) {
			return true
		}
	}
	return false
}

// refers reports whether the ref r names the service k (by name, or by
// labels), whatever the port.
func refers(r resource.BackendRef, k resource.Key, labels map[string]string) bool {
	if r.Name != "" {
		if r.Name != k.Name && r.Name != labels[resource.LabelDisplayName] {
			return false
		}
		return r.Namespace == "" || labels[resource.LabelNamespace] == r.Namespace
	}
	return tagsMatch(r.Labels, labels)
}
