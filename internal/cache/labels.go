package cache

import (
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
)

// Label maps cost far more than the strings they hold (a Go map of four
// labels takes about 340 bytes), and most resources share their labels
// with many others: every MeshService of a zone has the same origin, zone
// and mesh labels, and a display name equal to its own name. The cache
// therefore keeps one read-only map per distinct set of labels, counted by
// the entries that use it, and records a display name equal to the
// resource's name as a flag instead of a label. Get and List restore each
// resource's own labels in the clone they return.

// entry is one resource as the cache holds it.
type entry struct {
	// obj is the resource with its Labels replaced by a shared set
	// (never modified) that lacks the display name when nameLabel is set.
	obj *resource.Object
	// nameLabel means the resource is labelled kuma.io/display-name with
	// its own name.
	nameLabel bool
}

// label returns the value of the label k of the resource.
func (e entry) label(k string) (string, bool) {
	if e.nameLabel && k == resource.LabelDisplayName {
		return e.obj.Name, true
	}
	v, ok := e.obj.Labels[k]
	return v, ok
}

// clone returns a copy of the resource with its own labels, which the
// caller owns.
func (e entry) clone() *resource.Object {
	o := e.obj.Clone()
	if e.nameLabel {
		if o.Labels == nil {
			o.Labels = make(map[string]string, 1)
		}
		o.Labels[resource.LabelDisplayName] = o.Name
	}
	return o
}

// labelSets interns label maps by content.
type labelSets struct {
	sets map[string]*labelSet
}

type labelSet struct {
	labels map[string]string
	refs   int
}

func newLabelSets() *labelSets { return &labelSets{sets: map[string]*labelSet{}} }

// setKey is the content of labels as a string (sorted key=value pairs);
// "" for none.
func setKey(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	keys := make([]string, 0, len(labels))
	n := 0
	for k, v := range labels {
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		// Label keys and values cannot hold NUL, so the pairs cannot be
		// confused.
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}

// hold turns o, which the cache now owns, into an entry whose labels are
// a shared set.
func (s *labelSets) hold(o *resource.Object) entry {
	e := entry{obj: o}
	if o.Labels[resource.LabelDisplayName] == o.Name {
		e.nameLabel = true
		delete(o.Labels, resource.LabelDisplayName)
	}
	k := setKey(o.Labels)
	if k == "" {
		o.Labels = nil
		return e
	}
	set := s.sets[k]
	if set == nil {
		set = &labelSet{labels: o.Labels}
		s.sets[k] = set
	}
	set.refs++
	o.Labels = set.labels
	return e
}

// release forgets e's use of its label set.
func (s *labelSets) release(e entry) {
	k := setKey(e.obj.Labels)
	if k == "" {
		return
	}
	if set := s.sets[k]; set != nil {
		if set.refs--; set.refs == 0 {
			delete(s.sets, k)
		}
	}
}
