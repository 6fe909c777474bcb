package cli

import (
	"strings"
	"testing"
)

func TestUnifiedLines(t *testing.T) {
	for _, tc := range []struct{ name, a, b, want string }{
		{"Equal", "x\ny", "x\ny", " x| y"},
		{"Added", "", "x\ny", "+x|+y"},
		{"Removed", "x", "", "-x"},
		{"ChangedLineRemovedFirst", "a\nb\nc", "a\nB\nc", " a|-b|+B| c"},
		{"Inserted", "a\nc", "a\nb\nc", " a|+b| c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(unifiedLines(splitLines(tc.a), splitLines(tc.b)), "|")
			if got != tc.want {
				t.Errorf("unifiedLines = %q, want %q", got, tc.want)
			}
		})
	}
}
