package decode

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/validate"
)

type port struct {
	Name string `json:"name,omitempty" decode:"nonempty"`
	Port int    `json:"port"`
}

type spec struct {
	Ports    []port            `json:"ports"`
	Labels   map[string]string `json:"labels"`
	Ref      *port             `json:"ref"`
	Enabled  bool              `json:"enabled"`
	Weight   uint8             `json:"weight"`
	Small    int8              `json:"small"`
	Ratio    float64           `json:"ratio"`
	Config   json.RawMessage   `json:"config"`
	At       time.Time         `json:"at"`
	Any      any               `json:"any"`
	Color    color             `json:"color"`
	Ignored  string            // no json tag: not decodable
	Dash     string            `json:"-"`
	internal string            //lint:ignore U1000 present to show unexported fields are not decodable
}

// color implements Decoder: only "red" and "blue".
type color string

func (c *color) DecodeValue(v any) string {
	s, ok := v.(string)
	if !ok || (s != "red" && s != "blue") {
		return `must be "red" or "blue"`
	}
	*c = color(s)
	return ""
}

func fields(errs validate.Errors) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Message)
	}
	return out
}

func TestJSON_Decodes(t *testing.T) {
	var got spec
	errs := JSON([]byte(`{
		"ports": [{"name": "http", "port": 80}, {"port": 443}],
		"labels": {"kuma.io/zone": "east"},
		"ref": {"port": 8080},
		"enabled": true,
		"weight": 255,
		"small": -128,
		"ratio": 0.5,
		"config": {"b": [1, 2.5], "a": null},
		"at": "2024-05-01T10:00:00.5Z",
		"any": {"x": 1},
		"color": "red"
	}`), &got, "spec")
	if len(errs) > 0 {
		t.Fatalf("JSON: %v", errs)
	}
	want := spec{
		Ports:   []port{{Name: "http", Port: 80}, {Port: 443}},
		Labels:  map[string]string{"kuma.io/zone": "east"},
		Ref:     &port{Port: 8080},
		Enabled: true,
		Weight:  255,
		Small:   -128,
		Ratio:   0.5,
		Config:  json.RawMessage(`{"a":null,"b":[1,2.5]}`),
		At:      time.Date(2024, 5, 1, 10, 0, 0, 5e8, time.UTC),
		Any:     map[string]any{"x": json.Number("1")},
		Color:   "red",
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(spec{})); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

func TestJSON_Violations(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"UnknownField", `{"bogus": 1}`, []string{"spec.bogus: unknown field"}},
		{"UnknownNestedField", `{"ports": [{"port": 80}, {"port": 81, "bogus": 1}]}`, []string{"spec.ports[1].bogus: unknown field"}},
		{"FieldsAreCaseSensitive", `{"Ports": []}`, []string{"spec.Ports: unknown field"}},
		{"UnknownOddKeysAreQuoted", `{"": 1, "a.b": 2, "x y": 3, "ok_key-1": 4}`, []string{`spec[""]: unknown field`, `spec["a.b"]: unknown field`, "spec.ok_key-1: unknown field", `spec["x y"]: unknown field`}},
		{"UntaggedFieldIsUnknown", `{"Ignored": "x", "-": "y", "internal": "z"}`, []string{"spec.-: unknown field", "spec.Ignored: unknown field", "spec.internal: unknown field"}},
		{"StringForInt", `{"ports": [{"port": "eighty"}]}`, []string{`spec.ports[0].port: must be an integer, got string "eighty"`}},
		{"FractionForInt", `{"ports": [{"port": 80.5}]}`, []string{"spec.ports[0].port: must be an integer, got number 80.5"}},
		{"ExponentForInt", `{"ports": [{"port": 1e2}]}`, []string{"spec.ports[0].port: must be an integer, got number 1e2"}},
		{"IntOutOfRange", `{"small": 128}`, []string{"spec.small: must be an integer within range, got 128"}},
		{"HugeInt", `{"ports": [{"port": 99999999999999999999}]}`, []string{"spec.ports[0].port: must be an integer within range, got 99999999999999999999"}},
		{"NegativeUint", `{"weight": -1}`, []string{"spec.weight: must be a non-negative integer, got number -1"}},
		{"UintOutOfRange", `{"weight": 256}`, []string{"spec.weight: must be a non-negative integer within range, got 256"}},
		{"ObjectForMapString", `{"labels": {"a": {}}}`, []string{`spec.labels["a"]: must be a string, got an object`}},
		{"ListForMap", `{"labels": ["a"]}`, []string{"spec.labels: must be an object, got a list"}},
		{"ObjectForList", `{"ports": {}}`, []string{"spec.ports: must be a list, got an object"}},
		{"StringForStruct", `{"ref": "x"}`, []string{`spec.ref: must be an object, got string "x"`}},
		{"StringForBool", `{"enabled": "yes"}`, []string{`spec.enabled: must be true or false, got string "yes"`}},
		{"BoolForFloat", `{"ratio": true}`, []string{"spec.ratio: must be a number, got boolean true"}},
		{"FloatOutOfRange", `{"ratio": 1e400}`, []string{"spec.ratio: must be a number within range, got 1e400"}},
		{"BadTime", `{"at": "yesterday"}`, []string{`spec.at: must be a time in RFC 3339 format, got "yesterday"`}},
		{"NumberForTime", `{"at": 5}`, []string{"spec.at: must be a time in RFC 3339 format, got number 5"}},
		{"DecoderRule", `{"color": "green"}`, []string{`spec.color: must be "red" or "blue"`}},
		{"LongStringIsCut", `{"enabled": "` + strings.Repeat("x", 100) + `"}`, []string{`spec.enabled: must be true or false, got string "` + strings.Repeat("x", 40) + `..."`}},
		{"EveryProblemAtOnce", `{"bogus": 1, "ports": [{"port": "a"}, {"name": 5}], "enabled": 1}`, []string{
			"spec.bogus: unknown field",
			"spec.enabled: must be true or false, got number 1",
			`spec.ports[0].port: must be an integer, got string "a"`,
			"spec.ports[1].name: must be a string, got number 5 (quote it if it is meant as text)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s spec
			got := fields(JSON([]byte(tt.doc), &s, "spec"))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJSON_NullLeavesZero(t *testing.T) {
	var s spec
	errs := JSON([]byte(`{"ports": null, "labels": null, "ref": null, "enabled": null, "config": null, "color": null, "any": null}`), &s, "spec")
	if len(errs) > 0 {
		t.Fatalf("JSON: %v", errs)
	}
	if diff := cmp.Diff(spec{}, s, cmp.AllowUnexported(spec{})); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

func TestJSON_SyntaxAndTrailingData(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"Syntax", `{"ports": [}`, "invalid JSON: "},
		{"Empty", ``, "invalid JSON: "},
		{"SecondValue", `{} {}`, "unexpected data after the document"},
		{"TrailingWord", `{} x`, "unexpected data after the document"},
		// json.Decoder.More reports false for these, which once let them through.
		{"TrailingBrace", `{"ports": []}}`, "unexpected data after the document"},
		{"TrailingBracket", `{}]`, "unexpected data after the document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s spec
			errs := JSON([]byte(tt.doc), &s, "spec")
			if len(errs) != 1 || errs[0].Field != "spec" || !strings.Contains(errs[0].Message, tt.want) {
				t.Errorf("violations = %q, want one at spec containing %q", fields(errs), tt.want)
			}
		})
	}
	var s spec
	if errs := JSON([]byte("  {}\n\t "), &s, "spec"); len(errs) > 0 {
		t.Errorf("surrounding whitespace: %v", errs)
	}
}

func TestGeneric_Depth(t *testing.T) {
	nest := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	if _, err := Generic(nest(MaxDepth)); err != nil {
		t.Errorf("depth %d: %v", MaxDepth, err)
	}
	_, err := Generic(nest(MaxDepth + 2))
	if err == nil || !strings.Contains(err.Error(), "nests more than 64 levels") {
		t.Errorf("depth %d: err = %v, want the nesting limit", MaxDepth+2, err)
	}
}

type Base struct {
	Name string `json:"name"`
	Port int    `json:"port"`
}

type unexportedBase struct {
	Zone string `json:"zone"`
}

type derived struct {
	Base
	unexportedBase
	Port  string `json:"port"` // shadows Base.Port, as in encoding/json
	Extra int    `json:"extra"`
}

func TestJSON_EmbeddedStructsArePromoted(t *testing.T) {
	in := derived{Base: Base{Name: "a"}, unexportedBase: unexportedBase{Zone: "east"}, Port: "http", Extra: 2}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var got derived
	if errs := JSON(data, &got, ""); len(errs) > 0 {
		t.Fatalf("JSON(%s): %v", data, errs)
	}
	if diff := cmp.Diff(in, got, cmp.AllowUnexported(derived{})); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

func TestYAML(t *testing.T) {
	var s spec
	errs := YAML([]byte("ports:\n- name: http\n  port: 80\nlabels:\n  kuma.io/zone: east\n"), &s, "spec")
	if len(errs) > 0 {
		t.Fatalf("YAML: %v", errs)
	}
	want := spec{Ports: []port{{Name: "http", Port: 80}}, Labels: map[string]string{"kuma.io/zone": "east"}}
	if diff := cmp.Diff(want, s, cmp.AllowUnexported(spec{})); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	errs = YAML([]byte("ports: [\n"), &s, "spec")
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Message, "invalid YAML: ") {
		t.Errorf("syntax error: violations = %q", fields(errs))
	}
}

func TestYAMLGeneric(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    string // JSON, when accepted
		wantErr string
	}{
		{"Mapping", "a: 1\nb: [x, 'y']\n", `{"a":1,"b":["x","y"]}`, ""},
		{"JSON", `{"a": 1}`, `{"a":1}`, ""},
		{"LeadingSeparator", "---\na: 1\n", `{"a":1}`, ""},
		{"TrailingSeparator", "a: 1\n---\n", `{"a":1}`, ""},
		{"Empty", "", "null", ""},
		{"OnlyComment", "# nothing\n", "null", ""},
		// sigs.k8s.io/yaml drops everything after the first document.
		{"SecondDocument", "a: 1\n---\nb: 2\n", "", "more than one document"},
		{"DuplicateKey", "a: 1\na: 2\n", "", "already set"},
		{"Scalars", "i: -3\nf: 1.5\nbig: 1e3\nt: true\nz: null\ns: '07'\n1: int-key\n", `{"1":"int-key","big":1000,"f":1.5,"i":-3,"s":"07","t":true,"z":null}`, ""},
		{"Nested", "a:\n  b:\n  - c: [1, {d: e}]\n", `{"a":{"b":[{"c":[1,{"d":"e"}]}]}}`, ""},
		{"TrailingJSON", `{"a": 1} {}`, "", "unexpected content after the document"},
		{"TrailingGarbage", `{"a": 1} x`, "", "unexpected content after the document"},
		{"DocumentEnd", "a: 1\n...\nb: 2\n", "", "unexpected content after the document"},
		{"Syntax", "a: [\n", "", "invalid YAML: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := YAMLGeneric([]byte(tt.doc))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("YAMLGeneric = %v, %v; want an error containing %q", v, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("YAMLGeneric: %v", err)
			}
			got, err := json.Marshal(v)
			if err != nil || string(got) != tt.want {
				t.Errorf("YAMLGeneric = %s (%v), want %s", got, err, tt.want)
			}
		})
	}
}

func TestValue_PanicsOnNonPointer(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Value did not panic for a non-pointer")
		}
	}()
	Value(map[string]any{}, spec{}, "")
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"ports": [{"name": "http", "port": 80}], "labels": {"a": "b"}}`,
		`{"ref": {"port": 1}, "config": {"x": [1, {"y": null}]}, "at": "2024-01-01T00:00:00Z"}`,
		`{"weight": -1, "small": 1000, "ratio": "x", "color": "green"}`,
		`[[[[]]]]`,
		`{} }`,
		`{"": 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s spec
		for _, e := range JSON(data, &s, "spec") {
			if !strings.HasPrefix(e.Field, "spec") || e.Message == "" {
				t.Fatalf("violation outside the root or without a message: %+v", e)
			}
			// A field problem is never reported at the root itself.
			if e.Message == "unknown field" && e.Field == "spec" {
				t.Fatalf("unknown field reported at the root: %+v", e)
			}
		}
	})
}

func TestValue_MapOfStringsAcceptsBooleansOnly(t *testing.T) {
	var got struct {
		Labels map[string]string `json:"labels"`
	}
	errs := YAML([]byte("labels:\n  k8s.kuma.io/is-headless-service: false\n  version: 1.10\n  ok: yes-string\n  bad: [1]\n"), &got, "")
	want := map[string]string{"k8s.kuma.io/is-headless-service": "false", "version": "", "ok": "yes-string", "bad": ""}
	if diff := cmp.Diff(want, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	// 1.10 would read back as "1.1": it must be quoted, not silently changed.
	wantErrs := []string{`labels["bad"]: must be a string, got a list`, `labels["version"]: must be a string, got number 1.1 (quote it if it is meant as text)`}
	if d := cmp.Diff(wantErrs, fields(errs)); d != "" {
		t.Errorf("error fields (-want +got):\n%s\n%v", d, errs)
	}
}

func TestValue_NonEmptyRefusesAnEmptyString(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"Left out", `{"ports": [{"port": 80}]}`, nil},
		{"Given", `{"ports": [{"name": "http", "port": 80}]}`, nil},
		{"Empty", `{"ports": [{"name": "", "port": 80}, {"name": "", "port": 0}]}`, []string{
			"spec.ports[0].name: must not be empty: leave the field out to give it no value",
			"spec.ports[1].name: must not be empty: leave the field out to give it no value",
		}},
		{"Null is left out", `{"ref": {"name": null, "port": 1}}`, nil},
		{"Other fields empty", `{"ports": [{"port": 80}], "any": ""}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got spec
			if d := cmp.Diff(tt.want, fields(JSON([]byte(tt.doc), &got, "spec"))); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}
