package hostname

import (
	"math"
	"strings"
)

// NameLabels says which labels of a resource its name determines, so that
// what holds the labels of many resources keeps those as a few bits
// rather than as strings of their own: the display name when it begins
// the name (the name but for its last n bytes, n < 255: a zone's own
// services are named after their display names, a service synced from
// another zone <display name>-<hash>); and, on a MeshService made from a Kubernetes
// Service (named <name>.<namespace>, with the Service's name as its
// display name), k8s.kuma.io/service-name when it is the display name and
// k8s.kuma.io/namespace when it is what follows the display name and a
// dot. Resources that differ only in their names then share one set of
// the other labels. The zero value determines none.
type NameLabels uint16

const (
	nameCut       NameLabels = 0xff // the display name's cut
	nameDisplay   NameLabels = 1 << 8
	nameService   NameLabels = 1 << 9
	nameNamespace NameLabels = 1 << 10
)

// NameLabelsOf returns the labels of the resource name that name
// determines.
func NameLabelsOf(name string, labels map[string]string) NameLabels {
	display, ok := labels[labelDisplayName]
	if !ok || name == "" || !strings.HasPrefix(name, display) || len(name)-len(display) >= math.MaxUint8 {
		return 0
	}
	n := nameDisplay | NameLabels(len(name)-len(display))
	rest := name[len(display):]
	if v, ok := labels[labelServiceName]; ok && v == display {
		n |= nameService
	}
	if v, ok := labels[labelNamespace]; ok && len(rest) > 1 && rest[0] == '.' && v == rest[1:] {
		n |= nameNamespace
	}
	return n
}

// Has reports whether n determines the label key.
func (n NameLabels) Has(key string) bool {
	switch key {
	case labelDisplayName:
		return n&nameDisplay != 0
	case labelServiceName:
		return n&nameService != 0
	case labelNamespace:
		return n&nameNamespace != 0
	}
	return false
}

// Get returns the value of the label key of the resource name, when n
// determines it.
func (n NameLabels) Get(name, key string) (string, bool) {
	if !n.Has(key) {
		return "", false
	}
	display := name[:len(name)-int(n&nameCut)]
	if key == labelNamespace {
		return name[len(display)+1:], true
	}
	return display, true
}

// Len returns how many labels n determines.
func (n NameLabels) Len() int {
	return int(n>>8&1 + n>>9&1 + n>>10&1)
}

// AddTo sets in m the labels of the resource name that n determines.
func (n NameLabels) AddTo(name string, m map[string]string) {
	for _, k := range [...]string{labelDisplayName, labelServiceName, labelNamespace} {
		if v, ok := n.Get(name, k); ok {
			m[k] = v
		}
	}
}
