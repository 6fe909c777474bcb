package cache

import (
	"fmt"
	"maps"
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

// entry is one resource as the cache holds it: decoded while recent,
// frozen (see frozen.go) once it has not changed for FreezeAfter.
type entry struct {
	hot  *resource.Object // decoded, never modified; nil once frozen
	cold *frozen          // the stored encoding; nil while hot
	// labels is the resource's shared label set (hot.Labels too), which
	// lacks the display name when nameLabel is set.
	labels map[string]string
	// nameLabel means the resource is labelled kuma.io/display-name with
	// its own name.
	nameLabel bool
	at        int64 // when the cache stored it, UnixNano
}

// label returns the value of the label k of the resource.
func (e entry) label(name, k string) (string, bool) {
	if e.nameLabel && k == resource.LabelDisplayName {
		return name, true
	}
	v, ok := e.labels[k]
	return v, ok
}

// clone returns a copy of the resource k with its own labels, which the
// caller owns.
func (e entry) clone(k resource.Key) *resource.Object {
	var o *resource.Object
	if e.hot != nil {
		o = e.hot.Clone()
	} else {
		var err error
		if o, err = e.cold.thaw(k, maps.Clone(e.labels)); err != nil {
			// The cache encoded it from a decoded resource moments ago, as
			// the store does on every write: failing here is a bug.
			panic(fmt.Sprintf("cache: cannot decode %s as frozen: %v", k, err))
		}
	}
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

// hold turns o, which the cache now owns, into a hot entry whose labels
// are a shared set.
func (s *labelSets) hold(o *resource.Object) entry {
	e := entry{hot: o}
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
	o.Labels, e.labels = set.labels, set.labels
	return e
}

// release forgets e's use of its label set.
func (s *labelSets) release(e entry) {
	k := setKey(e.labels)
	if k == "" {
		return
	}
	if set := s.sets[k]; set != nil {
		if set.refs--; set.refs == 0 {
			delete(s.sets, k)
		}
	}
}
