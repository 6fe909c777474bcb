package resource

import (
	"slices"
	"strings"
	"testing"
)

func TestDisplayNameCut(t *testing.T) {
	long := "r" + strings.Repeat("x", 254) // the display name r and 254 more bytes
	tests := []struct {
		name, resource string
		labels         map[string]string
		cut            uint8
		ok             bool
	}{
		{"TheName", "redis", map[string]string{LabelDisplayName: "redis"}, 0, true},
		{"SyncedName", "redis-5c7f9", map[string]string{LabelDisplayName: "redis"}, 6, true},
		{"EmptyDisplayName", "redis", map[string]string{LabelDisplayName: ""}, 5, true},
		{"LongestCut", long, map[string]string{LabelDisplayName: "r"}, 254, true},
		{"CutOverAByte", long + "x", map[string]string{LabelDisplayName: "r"}, 0, false},
		{"NoDisplayName", "redis", map[string]string{LabelZone: "east"}, 0, false},
		{"NilLabels", "redis", nil, 0, false},
		{"ElsewhereInTheName", "my-redis", map[string]string{LabelDisplayName: "redis"}, 0, false},
		{"LongerThanTheName", "red", map[string]string{LabelDisplayName: "redis"}, 0, false},
		{"NoName", "", map[string]string{LabelDisplayName: ""}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cut, ok := DisplayNameCut(tt.resource, tt.labels)
			if cut != tt.cut || ok != tt.ok {
				t.Fatalf("DisplayNameCut = %d, %v; want %d, %v", cut, ok, tt.cut, tt.ok)
			}
			if ok && tt.resource[:len(tt.resource)-int(cut)] != tt.labels[LabelDisplayName] {
				t.Fatalf("the name without its last %d bytes is not the display name", cut)
			}
		})
	}
}

// NameLabels determines exactly the labels whose values the name gives,
// and gives them back.
func TestNameLabels(t *testing.T) {
	kube := map[string]string{LabelDisplayName: "redis", LabelServiceName: "redis", LabelNamespace: "shop", LabelZone: "east"}
	tests := []struct {
		name, resource string
		labels         map[string]string
		want           []string // the labels determined
	}{
		{"KubernetesService", "redis.shop", kube, []string{LabelDisplayName, LabelServiceName, LabelNamespace}},
		{"OtherNamespace", "redis.web", kube, []string{LabelDisplayName, LabelServiceName}},
		{"HeadlessPod", "redis-0.shop", map[string]string{LabelDisplayName: "redis-0", LabelServiceName: "redis", LabelNamespace: "shop"}, []string{LabelDisplayName, LabelNamespace}},
		{"Universal", "redis", map[string]string{LabelDisplayName: "redis", LabelZone: "east"}, []string{LabelDisplayName}},
		{"SyncedNotADot", "redis-shop", kube, []string{LabelDisplayName, LabelServiceName}},
		{"NothingAfterTheDot", "redis.", map[string]string{LabelDisplayName: "redis", LabelNamespace: ""}, []string{LabelDisplayName}},
		{"NoDisplayName", "redis.shop", map[string]string{LabelServiceName: "redis", LabelNamespace: "shop"}, nil},
		{"NoLabels", "redis.shop", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := NameLabelsOf(tt.resource, tt.labels)
			if n.Len() != len(tt.want) {
				t.Errorf("Len = %d, want %d", n.Len(), len(tt.want))
			}
			got := map[string]string{}
			n.AddTo(tt.resource, got)
			for _, k := range []string{LabelDisplayName, LabelServiceName, LabelNamespace, LabelZone} {
				want := slices.Contains(tt.want, k)
				if n.Has(k) != want {
					t.Errorf("Has(%s) = %v, want %v", k, n.Has(k), want)
				}
				v, ok := n.Get(tt.resource, k)
				if ok != want || want && v != tt.labels[k] {
					t.Errorf("Get(%s) = %q, %v; want %q, %v", k, v, ok, tt.labels[k], want)
				}
				if gv, ok := got[k]; ok != want || want && gv != tt.labels[k] {
					t.Errorf("AddTo set %s to %q (%v), want %q (%v)", k, gv, ok, tt.labels[k], want)
				}
			}
		})
	}
}
