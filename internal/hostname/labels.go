package hostname

import (
	"slices"
	"strings"
)

// labelSet is a set of labels in the compact form the engine keeps them
// in: key/value pairs sorted by key, in a slice of exactly their number.
//
// The engine holds the labels of every service. A Go map costs a few
// hundred bytes even with four entries, while the strings themselves are
// shared with the caller (the cache's decoder interns them), so a pair
// slice holds the same labels in a fraction of the memory. Services have a
// handful of labels, so a lookup scans them; a long set is searched.
type labelSet []labelPair

type labelPair struct {
	key, value string
}

// linearLabels is the length up to which get scans rather than searches.
const linearLabels = 8

// labelSetOf returns the labels of m as a labelSet (nil when m is empty).
// It does not keep m.
func labelSetOf(m map[string]string) labelSet {
	if len(m) == 0 {
		return nil
	}
	out := make(labelSet, 0, len(m))
	for k, v := range m {
		out = append(out, labelPair{k, v})
	}
	slices.SortFunc(out, func(a, b labelPair) int { return strings.Compare(a.key, b.key) })
	return out
}

// get returns the value of key and whether the set has it.
func (ls labelSet) get(key string) (string, bool) {
	if len(ls) <= linearLabels {
		for _, p := range ls {
			if p.key == key {
				return p.value, true
			}
		}
		return "", false
	}
	i, ok := slices.BinarySearchFunc(ls, key, func(p labelPair, key string) int { return strings.Compare(p.key, key) })
	if !ok {
		return "", false
	}
	return ls[i].value, true
}

// equalMap reports whether the set holds exactly the labels of m.
func (ls labelSet) equalMap(m map[string]string) bool {
	if len(ls) != len(m) {
		return false
	}
	for _, p := range ls {
		if v, ok := m[p.key]; !ok || v != p.value {
			return false
		}
	}
	return true
}

// contains reports whether every label of sub is in ls with the same
// value. Both are sorted, so one pass over each decides.
func (ls labelSet) contains(sub labelSet) bool {
	if len(sub) > len(ls) {
		return false
	}
	i := 0
	for _, want := range sub {
		for i < len(ls) && ls[i].key < want.key {
			i++
		}
		if i == len(ls) || ls[i].key != want.key || ls[i].value != want.value {
			return false
		}
		i++
	}
	return true
}
