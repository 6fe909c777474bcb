package resource

import (
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
