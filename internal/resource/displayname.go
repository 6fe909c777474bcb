package resource

import (
	"math"
	"strings"

	"github.com/meshnames/meshnames/internal/hostname"
)

// DisplayNameCut reports whether the kuma.io/display-name of labels begins
// name, the name of the resource they label, and how many bytes of name
// follow it then. A zone's own services are named after their display
// names (a cut of 0), and a service synced from another zone is named
// <display name>-<hash>. What holds the labels of many resources keeps
// such a display name as this count rather than as a string of its own,
// so that resources differing only in their names share one label set. A
// cut is at most 254, so that it fits a byte with room for a flag.
func DisplayNameCut(name string, labels map[string]string) (cut uint8, ok bool) {
	display, has := labels[LabelDisplayName]
	if !has || name == "" || !strings.HasPrefix(name, display) || len(name)-len(display) >= math.MaxUint8 {
		return 0, false
	}
	return uint8(len(name) - len(display)), true
}

// NameLabels says which labels of a resource its name determines
// (hostname.NameLabels, where the hostname engine, which does not import
// this package, finds it).
type NameLabels = hostname.NameLabels

// NameLabelsOf returns the labels of the resource name that name
// determines.
func NameLabelsOf(name string, labels map[string]string) NameLabels {
	return hostname.NameLabelsOf(name, labels)
}
