package hostname

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// manyLabels returns n labels k00=v00, k01=v01, ...: more than
// linearLabels, so that get searches.
func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = fmt.Sprintf("v%02d", i)
	}
	return m
}

func TestLabelSet_OfAndGet(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   labelSet
	}{
		{"Nil", nil, nil},
		{"Empty", map[string]string{}, nil},
		{"Sorted", map[string]string{"b": "2", "a": "1", "kuma.io/zone": "east", "": "empty"},
			labelSet{{"", "empty"}, {"a", "1"}, {"b", "2"}, {"kuma.io/zone", "east"}}},
		{"Many", manyLabels(linearLabels * 3), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := labelSetOf(tt.labels)
			if tt.want != nil {
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(labelPair{})); diff != "" {
					t.Errorf("labelSetOf (-want +got):\n%s", diff)
				}
			}
			if len(got) != cap(got) {
				t.Errorf("labelSetOf: len %d, cap %d: want an exact size", len(got), cap(got))
			}
			if !got.equalMap(tt.labels) {
				t.Errorf("labelSetOf(%v).equalMap of the same map = false", tt.labels)
			}
			for k, v := range tt.labels {
				if gotV, ok := got.get(k); !ok || gotV != v {
					t.Errorf("get(%q) = %q, %v; want %q, true", k, gotV, ok, v)
				}
			}
			for _, k := range []string{"missing", "k", "k99", "zzz", "0"} {
				if _, in := tt.labels[k]; in {
					continue
				}
				if v, ok := got.get(k); ok {
					t.Errorf("get(%q) = %q, true; want not found", k, v)
				}
			}
		})
	}
}

func TestLabelSet_EqualMap(t *testing.T) {
	base := map[string]string{"app": "web", "team": "a"}
	tests := []struct {
		name  string
		other map[string]string
		want  bool
	}{
		{"Same", map[string]string{"team": "a", "app": "web"}, true},
		{"ValueDiffers", map[string]string{"app": "web", "team": "b"}, false},
		{"KeyDiffers", map[string]string{"app": "web", "tea": "a"}, false},
		{"Fewer", map[string]string{"app": "web"}, false},
		{"More", map[string]string{"app": "web", "team": "a", "x": ""}, false},
		{"Nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := labelSetOf(base).equalMap(tt.other); got != tt.want {
				t.Errorf("equalMap(%v) = %v, want %v", tt.other, got, tt.want)
			}
		})
	}
	if !labelSetOf(nil).equalMap(map[string]string{}) || !labelSetOf(map[string]string{}).equalMap(nil) {
		t.Error("an empty set and an empty or nil map differ")
	}
}

// TestLabelSet_Contains checks selector matching against the map-based
// rule it replaces: every selector label present with an equal value.
func TestLabelSet_Contains(t *testing.T) {
	svc := map[string]string{"app": "web", "kuma.io/zone": "east", "team": "a", "v": ""}
	tests := []struct {
		name string
		sel  map[string]string
		want bool
	}{
		{"EmptySelectsAll", nil, true},
		{"One", map[string]string{"team": "a"}, true},
		{"All", map[string]string{"app": "web", "kuma.io/zone": "east", "team": "a", "v": ""}, true},
		{"FirstAndLast", map[string]string{"app": "web", "v": ""}, true},
		{"EmptyValue", map[string]string{"v": ""}, true},
		{"ValueDiffers", map[string]string{"team": "b"}, false},
		{"MissingKeyBefore", map[string]string{"a": "web"}, false},
		{"MissingKeyBetween", map[string]string{"app": "web", "b": "x"}, false},
		{"MissingKeyAfter", map[string]string{"zzz": ""}, false},
		{"EmptyValueIsNotAbsent", map[string]string{"w": ""}, false},
		{"MoreThanTheService", map[string]string{"app": "web", "kuma.io/zone": "east", "team": "a", "v": "", "x": "1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := labelSetOf(svc).contains(labelSetOf(tt.sel)); got != tt.want {
				t.Errorf("contains(%v) = %v, want %v", tt.sel, got, tt.want)
			}
		})
	}
	if labelSetOf(nil).contains(labelSetOf(map[string]string{"a": "b"})) {
		t.Error("a service without labels matches a selector")
	}
}

// TestEngine_StateSizes pins the size of what the engine keeps per service
// and per name (issue 3's memory target): a field added to one of these
// costs 100,000 times over, so it should be a conscious choice. Sizes are
// for 64-bit platforms.
func TestEngine_StateSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are pinned for 64-bit platforms")
	}
	tests := []struct {
		name      string
		got, want uintptr
	}{
		{"svcState", unsafe.Sizeof(svcState{}), 112},
		{"render", unsafe.Sizeof(render{}), 48},
		{"claimList", unsafe.Sizeof(claimList{}), 64},
		{"labelPair", unsafe.Sizeof(labelPair{}), 32},
	}
	for _, tt := range tests {
		if tt.got > tt.want {
			t.Errorf("%s is %d bytes, more than %d", tt.name, tt.got, tt.want)
		}
	}
}
