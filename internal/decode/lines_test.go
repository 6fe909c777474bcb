package decode

import (
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/validate"
)

const linesDoc = `# a comment line
type: MeshService
name: web
labels:
  kuma.io/zone: east
  "odd key]": x
spec:
  ports:
  - port: 0
    appProtocol: udp
  - port: 8080

    targetPot: 80
  selector: &sel
    dataplaneTags:
      app: web
  copy: *sel
`

func TestLines_Line(t *testing.T) {
	l := YAMLLines([]byte(linesDoc))
	for _, tc := range []struct {
		path  validate.Path
		want  int
		whole bool
	}{
		{"", 2, true},                                 // the root: its first line
		{"name", 3, true},                             // a top-level field
		{`labels["kuma.io/zone"]`, 5, true},           // a quoted map key
		{`labels["odd key]"]`, 6, true},               // a quoted key holding ']'
		{"spec.ports[0].port", 9, true},               // a field of a list element
		{"spec.ports[0].appProtocol", 10, true},       // the next line of the element
		{"spec.ports[1]", 11, true},                   // a list element: its own line
		{"spec.ports[1].targetPot", 13, true},         // after a blank line
		{"spec.ports[1].targetPort", 11, false},       // missing: the element
		{"spec.ports[7].port", 8, false},              // no such element: the list's key
		{"spec.selector.dataplaneTags.app", 16, true}, // nested maps
		{"spec.copy.dataplaneTags.app", 16, true},     // through an alias: where it is written
		{"mesh", 2, false},                            // a required field left out
		{"spec.ports.port", 8, false},                 // a list indexed by name: the list
		{"spec[0]", 7, false},                         // a map indexed by number: the map
		{"spec..ports", 0, false},                     // not a path
		{"spec.ports[x]", 0, false},                   // not a path
		{`labels["unterminated]`, 0, false},           // not a path
	} {
		if got := l.Line(tc.path); got != tc.want {
			t.Errorf("Line(%q) = %d, want %d", tc.path, got, tc.want)
		}
		if _, whole := l.Find(tc.path); whole != tc.whole {
			t.Errorf("Find(%q) whole = %v, want %v", tc.path, whole, tc.whole)
		}
	}
}

func TestLines_JSONAndUnparsable(t *testing.T) {
	j := YAMLLines([]byte("{\n  \"type\": \"MeshService\",\n  \"spec\": {\n    \"ports\": [\n      {\"port\": 0}\n    ]\n  }\n}\n"))
	if got := j.Line("spec.ports[0].port"); got != 5 {
		t.Errorf("JSON: Line(spec.ports[0].port) = %d, want 5", got)
	}
	for _, bad := range []string{"", "# only a comment\n", "a: ["} {
		if got := YAMLLines([]byte(bad)).Line("a"); got != 0 {
			t.Errorf("YAMLLines(%q).Line(a) = %d, want 0", bad, got)
		}
	}
	// A scalar document parses: paths into it resolve to its line.
	if got := YAMLLines([]byte("\n\nscalar\n")).Line("a.b"); got != 3 {
		t.Errorf("scalar document: Line(a.b) = %d, want 3", got)
	}
}

// FuzzLines checks that any document and path give a line within the
// document (or 0), never a panic.
func FuzzLines(f *testing.F) {
	f.Add([]byte(linesDoc), "spec.ports[1].targetPot")
	f.Add([]byte("a: &x [1, *x]"), "a[1][0]")
	f.Add([]byte("{\"a\": {\"b\": [1]}}"), `a["b"][0]`)
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		if len(data) > 1<<16 {
			return
		}
		// YAML breaks lines at \n, \r and a few Unicode separators:
		// counting each as one bounds the number of lines.
		lines := 1 + strings.Count(string(data), "\n") + strings.Count(string(data), "\r") +
			strings.Count(string(data), "\u0085") + strings.Count(string(data), "\u2028") + strings.Count(string(data), "\u2029")
		if got := YAMLLines(data).Line(validate.Path(path)); got < 0 || got > lines {
			t.Fatalf("Line(%q) = %d, outside the document's %d lines", path, got, lines)
		}
	})
}
