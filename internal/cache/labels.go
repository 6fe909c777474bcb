package cache

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Label maps cost far more than the strings they hold (a Go map of four
// labels takes about 340 bytes), and most resources share their labels
// with many others: every MeshService of a zone has the same origin, zone
// and mesh labels, and a display name that begins its own name (is it, for
// a service created in the zone; is it but for the hash suffix, for one
// synced from another zone: "redis" of "redis-<hash>"; and a MeshService
// made from a Kubernetes Service, named <name>.<namespace>, also has the
// Service's name and namespace as labels). A frozen entry therefore points
// at one read-only map per distinct set of labels, counted by the entries
// that use it, and records the labels its name determines
// (resource.NameLabels) as a few bits instead of labels. Reads restore
// each resource's own labels.

// entry is one resource as the cache holds it: decoded while recent,
// frozen (see frozen.go) once it has not changed for FreezeAfter.
type entry struct {
	// hot is the resource decoded, with its own labels; never modified,
	// and nil once frozen.
	hot *resource.Object
	// cold is the stored encoding, or kept the store's own copy
	// (store.Keeper), once frozen; both nil while hot. labels is then
	// the resource's shared label set, which lacks the labels its name
	// determines (named).
	cold   frozen
	kept   store.Kept
	labels map[string]string
	named  resource.NameLabels
	// listed marks an entry stored by a list of the store rather than by
	// the change feed: MaxDecoded does not count it (frozen.go).
	listed bool
	at     int64 // when the cache stored it, UnixNano
	// enc is hot's spec and status as the store encoded them, when the
	// change feed had them at hand (store.Event.Encoding): the freezer
	// compresses them rather than encode hot again.
	enc *store.Encoding
}

// label returns the value of the label k of the resource.
func (e entry) label(name, k string) (string, bool) {
	if e.hot != nil {
		v, ok := e.hot.Labels[k]
		return v, ok
	}
	if v, ok := e.named.Get(name, k); ok {
		return v, true
	}
	v, ok := e.labels[k]
	return v, ok
}

// clone returns a copy of the resource k, which the caller owns.
func (e entry) clone(k resource.Key) *resource.Object {
	if e.hot != nil {
		return e.hot.Clone()
	}
	return e.thaw(k)
}

// shared returns the resource k for reading only: the entry's own object
// while it is hot, else a decoded copy.
func (e entry) shared(k resource.Key) *resource.Object {
	if e.hot != nil {
		return e.hot
	}
	return e.thaw(k)
}

// appendJSON appends the document of the resource k (Page.AppendJSON).
func (e entry) appendJSON(b []byte, k resource.Key) ([]byte, error) {
	if e.hot != nil {
		// The spec and status as the store encoded them (what
		// json.Marshal wrote), rather than encoded again.
		if enc := e.enc; enc != nil && strings.HasPrefix(enc.Spec, "{") &&
			(enc.Status == "") == (e.hot.Status == nil) && (enc.Status == "" || enc.Status[0] == '{') {
			var status []byte
			if enc.Status != "" {
				status = []byte(enc.Status)
			}
			return resource.AppendDocument(b, k, e.hot.CreationTime, e.hot.ModificationTime, e.hot.Labels, []byte(enc.Spec), status)
		}
		return e.hot.AppendJSON(b)
	}
	if e.kept != nil {
		return e.kept.AppendJSON(b)
	}
	labels := e.labels
	if e.named != 0 {
		labels = e.ownLabels(k.Name)
	}
	return e.cold.appendJSON(b, k, labels)
}

// coldRevision returns the revision of a frozen entry, without decoding
// it; false when its header is unreadable.
func (e entry) coldRevision() (int64, bool) {
	if e.kept != nil {
		return e.kept.Revision(), true
	}
	return e.cold.revision()
}

// ownLabels returns a copy of the labels of the frozen resource name.
func (e entry) ownLabels(name string) map[string]string {
	if e.labels == nil && e.named == 0 {
		return nil
	}
	labels := make(map[string]string, len(e.labels)+e.named.Len())
	maps.Copy(labels, e.labels)
	e.named.AddTo(name, labels)
	return labels
}

func (e entry) thaw(k resource.Key) *resource.Object {
	if e.kept != nil {
		o, err := e.kept.Object()
		if err != nil {
			// The store decoded the same bytes when it made them.
			panic(fmt.Sprintf("cache: cannot decode the store's copy of %s: %v", k, err))
		}
		return o
	}
	o, err := e.cold.thaw(k, e.ownLabels(k.Name))
	if err != nil {
		// The cache encoded it from a decoded resource, as the store does
		// on every write: failing here is a bug.
		panic(fmt.Sprintf("cache: cannot decode %s as frozen: %v", k, err))
	}
	return o
}

// labelSets interns label maps by content. Its user holds the cache's
// lock for every call (buf is shared).
type labelSets struct {
	sets map[string]*labelSet
	// buf is where a set's key is built: a lookup of a set that exists
	// (nearly every one: a zone's synced services share a few) allocates
	// nothing. Built as a string each time, with its keys sorted in a
	// new slice, it was a third of freezing in a zone's initial sync.
	buf []byte
}

type labelSet struct {
	labels map[string]string
	refs   int
}

func newLabelSets() *labelSets { return &labelSets{sets: map[string]*labelSet{}} }

// setKey is the content of labels without those skip determines, as a
// string (sorted key=value pairs); "" for none.
func setKey(labels map[string]string, skip resource.NameLabels) string {
	return string(appendSetKey(nil, labels, skip))
}

// appendSetKey appends setKey(labels, skip) to b.
func appendSetKey(b []byte, labels map[string]string, skip resource.NameLabels) []byte {
	var kbuf [8]string // most resources have a few labels: sorted on the stack
	keys := kbuf[:0]
	for k := range labels {
		if !skip.Has(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		// Label keys and values cannot hold NUL, so the pairs cannot be
		// confused.
		b = append(append(b, k...), 0)
		b = append(append(b, labels[k]...), 0)
	}
	return b
}

// hold returns the shared set for labels of the resource name (which it
// does not modify), without the labels name determines, and those.
func (s *labelSets) hold(name string, labels map[string]string) (map[string]string, resource.NameLabels) {
	named := resource.NameLabelsOf(name, labels)
	s.buf = appendSetKey(s.buf[:0], labels, named)
	if len(s.buf) == 0 {
		return nil, named
	}
	set := s.sets[string(s.buf)]
	if set == nil {
		m := make(map[string]string, len(labels)-named.Len())
		for lk, lv := range labels {
			if !named.Has(lk) {
				m[lk] = lv
			}
		}
		set = &labelSet{labels: m}
		s.sets[string(s.buf)] = set
	}
	set.refs++
	return set.labels, named
}

// release forgets e's use of its label set.
func (s *labelSets) release(e entry) {
	s.buf = appendSetKey(s.buf[:0], e.labels, 0)
	if len(s.buf) == 0 {
		return
	}
	if set := s.sets[string(s.buf)]; set != nil {
		if set.refs--; set.refs == 0 {
			delete(s.sets, string(s.buf))
		}
	}
}
