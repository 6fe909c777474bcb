package hostname

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/meshnames/meshnames/internal/validate"
)

var redis = Vars{
	Name:        "redis-6f7c",
	DisplayName: "redis",
	Namespace:   "demo-app",
	Zone:        "east",
	Mesh:        "default",
	Labels: map[string]string{
		"k8s.kuma.io/service-name": "redis",
		"k8s.kuma.io/namespace":    "demo-app",
		"kuma.io/zone":             "east",
		"Upper":                    "UPPER",
		"empty":                    "",
	},
}

func TestTemplate_Render(t *testing.T) {
	tests := []struct {
		name     string
		template string
		vars     Vars
		want     string
	}{
		// seed 000's example generator.
		{"Seed000Labels", `{{ label "k8s.kuma.io/service-name" }}.{{ label "k8s.kuma.io/namespace" }}.svc.mesh.{{ label "kuma.io/zone" }}`, redis, "redis.demo-app.svc.mesh.east"},
		{"NameFunction", `{{ name }}.svc.mesh.local`, redis, "redis-6f7c.svc.mesh.local"},
		{"NameField", `{{ .Name }}.svc.mesh.local`, redis, "redis-6f7c.svc.mesh.local"},
		// seed 001 defaults.
		{"DisplayName", `{{ .DisplayName }}.svc.{{ .Zone }}.mesh.local`, redis, "redis.svc.east.mesh.local"},
		{"DisplayNameFallsBackToName", `{{ .DisplayName }}.extsvc.mesh.local`, Vars{Name: "httpbin"}, "httpbin.extsvc.mesh.local"},
		{"NamespaceAndMesh", `{{ .Name }}.{{ .Namespace }}.{{ .Mesh }}`, redis, "redis-6f7c.demo-app.default"},
		{"Conditional", `{{ .DisplayName }}.svc.{{ if .Zone }}{{ .Zone }}.{{ end }}mesh.local`, Vars{Name: "a"}, "a.svc.mesh.local"},
		{"PipelineIntoLabel", `{{ "kuma.io/zone" | label }}.mesh`, redis, "east.mesh"},
		{"Printf", `{{ printf "%s-%s" .DisplayName .Zone }}.mesh`, redis, "redis-east.mesh"},
		{"LabelInsideWith", `{{ with .Namespace }}{{ label "kuma.io/zone" }}.{{ . }}{{ end }}.mesh`, redis, "east.demo-app.mesh"},
		{"MaxLabelLength", `{{ .Name }}.mesh`, Vars{Name: strings.Repeat("a", 63)}, strings.Repeat("a", 63) + ".mesh"},
		{"MaxTotalLength", `{{ .Name }}.{{ .Zone }}.{{ .Mesh }}.{{ .Namespace }}`, Vars{Name: strings.Repeat("a", 63), Zone: strings.Repeat("b", 63), Mesh: strings.Repeat("c", 63), Namespace: strings.Repeat("d", 61)}, strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse(tt.template)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := tmpl.Render(tt.vars)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("Render = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTemplate_RenderMissingLabel(t *testing.T) {
	tmpl, err := Parse(`{{ label "app" }}.{{ label "kuma.io/zone" }}.mesh`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(redis)
	var missing *MissingLabelError
	if !errors.As(err, &missing) {
		t.Fatalf("Render error = %v (%T), want *MissingLabelError", err, err)
	}
	if missing.Key != "app" {
		t.Errorf("missing key = %q, want %q", missing.Key, "app")
	}
	if got, want := err.Error(), `label "app" is missing`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	// No labels at all.
	if _, err := tmpl.Render(Vars{Name: "x"}); !errors.As(err, &missing) {
		t.Errorf("Render with nil labels: error = %v, want *MissingLabelError", err)
	}
}

func TestTemplate_RenderInvalidName(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	tests := []struct {
		name     string
		template string
		vars     Vars
		hostname string // the quoted name in the error
		rule     string // part of the rule stated
	}{
		{"UpperCase", `{{ label "Upper" }}.mesh`, redis, "UPPER.mesh", "lower case"},
		{"UpperCaseLiteral", `{{ .Name }}.MESH`, redis, "redis-6f7c.MESH", "lower case"},
		{"DoubleDot", `{{ .Name }}..mesh`, redis, "redis-6f7c..mesh", "dot-separated labels of 1 to 63"},
		{"LeadingDot", `.{{ .Name }}.mesh`, redis, ".redis-6f7c.mesh", "dot-separated"},
		{"TrailingDot", `{{ .Name }}.mesh.`, redis, "redis-6f7c.mesh.", "dot-separated"},
		{"EmptyLabelValue", `{{ label "empty" }}.mesh`, redis, ".mesh", "dot-separated"},
		{"Underscore", `{{ .Name }}_svc.mesh`, redis, "redis-6f7c_svc.mesh", "letters, digits and '-'"},
		{"LeadingHyphen", `-{{ .Name }}.mesh`, redis, "-redis-6f7c.mesh", "starting and ending with a letter or digit"},
		{"LabelLongerThan63", `{{ .Name }}a.mesh`, Vars{Name: long63}, long63 + "a.mesh", "1 to 63"},
		{"TotalLongerThan253", `{{ .Name }}.{{ .Name }}.{{ .Name }}.{{ .Name }}`, Vars{Name: long63}, strings.Repeat(long63+".", 4)[:253] + "...", "no more than 253 characters"},
		{"Empty", `{{ .Namespace }}`, Vars{Name: "x"}, "", "must not be empty"},
		{"TrailingNewline", "{{ .Name }}.mesh\n", redis, "redis-6f7c.mesh\n", "lower case"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse(tt.template)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := tmpl.Render(tt.vars)
			var invalid *InvalidNameError
			if !errors.As(err, &invalid) {
				t.Fatalf("Render = %q, %v; want *InvalidNameError", got, err)
			}
			if invalid.Hostname != tt.hostname {
				t.Errorf("Hostname = %q, want %q", invalid.Hostname, tt.hostname)
			}
			if !strings.Contains(invalid.Rule, tt.rule) {
				t.Errorf("Rule = %q, want it to contain %q", invalid.Rule, tt.rule)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.hostname)) {
				t.Errorf("error %q does not quote the rendered name", err)
			}
		})
	}
}

func TestParse_Refuses(t *testing.T) {
	tests := []struct {
		name     string
		template string
		want     string
	}{
		{"Empty", ``, "empty"},
		{"TooLong", strings.Repeat("a", MaxTemplateLength+1), "limit of 1024"},
		{"SyntaxError", `{{ .Name `, "cannot parse template: template: hostname:1"},
		{"UnknownFunction", `{{ lower .Name }}`, `function "lower" not defined`},
		{"Range", `{{ range 1000000000 }}{{ end }}a`, "range is not allowed"},
		{"Define", `{{ define "x" }}a{{ end }}{{ template "x" }}`, "not allowed"},
		{"Block", `{{ block "x" . }}a{{ end }}`, "not allowed"},
		{"Html", `{{ html .Name }}`, `function "html" is not allowed`},
		{"Call", `{{ call .Name }}`, `function "call" is not allowed`},
		{"NestedInIf", `{{ if true }}{{ js .Name }}{{ end }}`, `function "js" is not allowed`},
		{"NestedInElse", `{{ if false }}a{{ else }}{{ urlquery .Name }}{{ end }}`, `function "urlquery" is not allowed`},
		{"NestedInArgument", `{{ printf "%s" (html .Name) }}`, `function "html" is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.template)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestTemplate_RenderBoundsStrings(t *testing.T) {
	// Each step multiplies the length by eight; without the bound on
	// printf this would need gigabytes.
	text := `{{ $a := printf "%0900d" 0 }}{{ $b := printf "%s%s%s%s%s%s%s%s" $a $a $a $a $a $a $a $a }}{{ $c := printf "%s%s%s%s%s%s%s%s" $b $b $b $b $b $b $b $b }}a`
	tmpl, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(redis)
	if err == nil || !strings.Contains(err.Error(), "limit of 1024") {
		t.Errorf("Render error = %v, want the string limit", err)
	}
}

func TestTemplate_RenderOtherErrors(t *testing.T) {
	tmpl, err := Parse(`{{ index .Name 99 }}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(redis)
	if err == nil || !strings.HasPrefix(err.Error(), "cannot render template: ") {
		t.Errorf("Render error = %v, want a 'cannot render template' error", err)
	}
}

func TestTemplate_RenderConcurrent(t *testing.T) {
	tmpl, err := Parse(`{{ label "app" }}.{{ .Zone }}.mesh`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				app := fmt.Sprintf("app-%d-%d", g, i)
				got, err := tmpl.Render(Vars{Name: "x", Zone: "z", Labels: map[string]string{"app": app}})
				if err != nil {
					t.Errorf("Render: %v", err)
					return
				}
				if want := app + ".z.mesh"; got != want {
					t.Errorf("Render = %q, want %q (renders leaked into each other)", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		template string
		want     string // "" for accepted, else a prefix of the message
	}{
		// Kuma's validate_test.go examples.
		{"AllFields", `{{ .Name }}.{{ .DisplayName }}.{{ .Namespace }}.{{ .Mesh }}.{{ .Zone }}.mesh`, ""},
		{"Label", `{{ label "app" }}.mesh`, ""},
		{"UpperCase", `{{ .Name }}.MESH`, `template renders to "name.MESH" which is not a valid DNS name: must be a lower case RFC 1123 DNS name`},
		{"LeadingDot", `.{{ .Name }}.mesh`, `template renders to ".name.mesh" which is not a valid DNS name: `},
		{"DoubleDot", `{{ .Name }}..mesh`, `template renders to "name..mesh" which is not a valid DNS name: `},
		{"Underscore", `{{ .Name }}_svc.mesh`, `template renders to "name_svc.mesh" which is not a valid DNS name: `},
		// seed 000 and 001 spellings.
		{"NameFunction", `{{ name }}.svc.meshext.local`, ""},
		{"Seed001Headless", `{{ label "statefulset.kubernetes.io/pod-name" }}.{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local`, ""},
		{"Empty", ``, "must not be empty"},
		{"TooLong", strings.Repeat("a", MaxTemplateLength+1), "must be no more than 1024 bytes"},
		{"UnknownField", `{{ .Foo }}.mesh`, "cannot render template with stub values: template: hostname:1:3: executing \"hostname\" at <.Foo>: can't evaluate field Foo"},
		{"LabelsFieldIsNotExposed", `{{ .Labels.app }}.mesh`, "cannot render template with stub values: "},
		{"SyntaxError", `{{ .Name }`, "cannot parse template: template: hostname:1: "},
		{"BadCharacter", `{{ [ }}`, `cannot parse template: template: hostname:1: unexpected "[" in command`},
		{"UnknownFunction", `{{ upper .Name }}`, "cannot parse template: template: hostname:1: function \"upper\" not defined"},
		{"Range", `{{ range 3 }}a{{ end }}`, "cannot parse template: range is not allowed in hostname templates"},
		{"RendersEmpty", `{{ if false }}a{{ end }}`, `template renders to "" which is not a valid DNS name: must not be empty`},
		{"RendersTooLong", strings.Repeat("{{ .DisplayName }}.", 30) + "mesh", `template renders to "displayname.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.template)
			if tt.want == "" {
				if got != "" {
					t.Errorf("Check = %q, want accepted", got)
				}
				return
			}
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("Check = %q\nwant prefix %q", got, tt.want)
			}
		})
	}
}

func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		`{{ .Name }}.svc.mesh.local`,
		`{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local`,
		`{{ .DisplayName }}.extsvc.mesh.local`,
		`{{ name }}.{{ .Mesh }}`,
		`{{ if .Zone }}{{ .Zone }}.{{ end }}mesh`,
		`{{ printf "%s-%d" .Name 8 }}.mesh`,
		`{{ label "missing" }}`,
		`{{ .Name }}..mesh`,
		`{{ range 3 }}x{{ end }}`,
		`{{ index .Name 1 }}`,
		`{{ slice .Name 1 3 }}.{{ len .Zone }}`,
	} {
		f.Add(s)
	}
	vars := Vars{
		Name: "backend-1a2b", DisplayName: "backend", Namespace: "kuma-demo", Zone: "east", Mesh: "default",
		Labels: map[string]string{"k8s.kuma.io/service-name": "backend", "app": "Backend_1", "kuma.io/zone": "east"},
	}
	f.Fuzz(func(t *testing.T, text string) {
		msg := Check(text)
		tmpl, err := Parse(text)
		if err != nil {
			if msg == "" {
				t.Fatalf("Check accepted %q but Parse failed: %v", text, err)
			}
			return
		}
		if tmpl.fast != nil {
			sameAsEngine(t, tmpl, vars)
		}
		got, err := tmpl.Render(vars)
		if err != nil {
			return
		}
		if rule := validate.DNS1123Subdomain(got); rule != "" {
			t.Fatalf("Render(%q) = %q, which is not a DNS name: %s", text, got, rule)
		}
	})
}

// BenchmarkRender measures one render of seed 001's synced Kubernetes
// template; the hostnames controller renders once per (generator, service).
func BenchmarkRender(b *testing.B) {
	tmpl, err := Parse(`{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := tmpl.Render(redis); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRenderEngine is BenchmarkRender without the fast path, for
// comparison and for templates that need the engine.
func BenchmarkRenderEngine(b *testing.B) {
	tmpl, err := Parse(`{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			v := redis
			if _, err := tmpl.renderEngine(&v, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if msg := Check(`{{ .DisplayName }}.svc.{{ .Zone }}.mesh.local`); msg != "" {
			b.Fatal(msg)
		}
	}
}

// sameAsEngine checks that the fast path renders exactly what the template
// engine renders, for v and for the stub values, errors included.
func sameAsEngine(t *testing.T, tmpl *Template, v Vars) {
	t.Helper()
	if v.DisplayName == "" {
		v.DisplayName = v.Name
	}
	for _, stub := range []bool{false, true} {
		fast, fastErr := tmpl.renderFast(&v, stub)
		slow, slowErr := tmpl.renderEngine(&v, stub)
		if fast != slow || fmt.Sprint(fastErr) != fmt.Sprint(slowErr) {
			t.Fatalf("template %q (stub %v): fast path = %q, %v; engine = %q, %v", tmpl, stub, fast, fastErr, slow, slowErr)
		}
	}
}

func TestTemplate_FastPathMatchesEngine(t *testing.T) {
	long := Vars{Name: strings.Repeat("a", 200), Zone: strings.Repeat("z", 100), Labels: map[string]string{"app": "UP"}}
	tests := []struct {
		name     string
		template string
		fast     bool
	}{
		{"Seed000", `{{ label "k8s.kuma.io/service-name" }}.{{ label "k8s.kuma.io/namespace" }}.svc.mesh.{{ label "kuma.io/zone" }}`, true},
		{"Seed001", `{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local`, true},
		{"AllFields", `{{ .Name }}.{{ .DisplayName }}.{{ .Namespace }}.{{ .Mesh }}.{{ .Zone }}.{{ name }}`, true},
		{"TrimMarkers", "{{- .Name -}} . {{- .Zone }}", true},
		{"OnlyText", "mesh.local", true},
		{"OnlyComment", "{{/* nothing */}}", true},
		{"MissingLabelAfterOverflow", `{{ .Name }}.{{ .Zone }}.{{ label "missing" }}`, true},
		{"InvalidLabel", `{{ label "app" }}.mesh`, true},
		{"Pipeline", `{{ .Name | printf "%s" }}.mesh`, false},
		{"If", `{{ if .Zone }}{{ .Zone }}{{ end }}.mesh`, false},
		{"Variable", `{{ $z := .Zone }}{{ $z }}.mesh`, false},
		{"LabelOfField", `{{ label .Name }}.mesh`, false},
		{"ChainedField", `{{ .Name.Foo }}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse(tt.template)
			if err != nil {
				t.Fatal(err)
			}
			if got := tmpl.fast != nil; got != tt.fast {
				t.Fatalf("fast path used = %v, want %v", got, tt.fast)
			}
			if tmpl.fast == nil {
				return
			}
			for _, v := range []Vars{redis, long, {}} {
				sameAsEngine(t, tmpl, v)
			}
		})
	}
}
