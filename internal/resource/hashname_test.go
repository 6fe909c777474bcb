package resource

import (
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/validate"
)

// TestDisplayName pins the shortening of long display names: a change
// relabels every such resource of every deployment, so it must be
// deliberate.
func TestDisplayName(t *testing.T) {
	l61, l62 := strings.Repeat("a", 61), strings.Repeat("b", 62)
	dataplane := l61 + "." + l62 + "." + l62 + "." + l62 // 250 bytes
	tests := []struct {
		name, in, want string
	}{
		{"Short", "redis", "redis"},
		{"Longest kept", strings.Repeat("x", 63), strings.Repeat("x", 63)},
		{"Empty", "", ""},
		{"One over", strings.Repeat("x", 64), strings.Repeat("x", 48) + "-" + Hash(strings.Repeat("x", 64))},
		{"Dataplane of four labels", dataplane, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-d5b5r4scdpdbm2"},
		{"No dot or dash before the hash", strings.Repeat("y", 47) + ".-" + strings.Repeat("z", 20), strings.Repeat("y", 47) + "-" + Hash(strings.Repeat("y", 47)+".-"+strings.Repeat("z", 20))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DisplayName(tt.in)
			if got != tt.want {
				t.Errorf("DisplayName(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got != "" {
				if msg := validate.LabelValue(got); msg != "" {
					t.Errorf("DisplayName(%q) = %q is not a label value: %s", tt.in, got, msg)
				}
			}
		})
	}
	// Names that begin alike keep labels apart.
	if a, b := DisplayName(dataplane), DisplayName(dataplane[:len(dataplane)-1]+"c"); a == b {
		t.Errorf("two long names share the display name %q", a)
	}
}
