package validate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPath(t *testing.T) {
	tests := []struct {
		name string
		got  Path
		want string
	}{
		{"Root", Path(""), ""},
		{"FieldFromRoot", Path("").Field("spec"), "spec"},
		{"Nested", Path("spec").Field("ports").Index(0).Field("appProtocol"), "spec.ports[0].appProtocol"},
		{"IndexFromRoot", Path("").Index(2), "[2]"},
		{"KeyIsQuoted", Path("labels").Key("kuma.io/zone"), `labels["kuma.io/zone"]`},
		{"KeyWithQuote", Path("labels").Key(`a"b`), `labels["a\"b"]`},
		{"EmptyKey", Path("labels").Key(""), `labels[""]`},
		{"FieldAfterKey", Path("tags").Key("a.b").Field("x"), `tags["a.b"].x`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got.String() != tt.want {
				t.Errorf("path = %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	var errs Errors
	if errs.Err() != nil {
		t.Fatal("empty Errors: Err() != nil")
	}
	errs.Add("name", "must not be empty")
	errs.Addf(Path("spec").Field("ports").Index(1), "port %d is taken", 80)
	errs.Check("spec.state", "")
	errs.Check("spec.state", "must be one of")
	errs.Append(Errors{{Field: "", Message: "document is empty"}})

	want := Errors{
		{Field: "name", Message: "must not be empty"},
		{Field: "spec.ports[1]", Message: "port 80 is taken"},
		{Field: "spec.state", Message: "must be one of"},
		{Field: "", Message: "document is empty"},
	}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if got, want := errs.Error(), "name: must not be empty; spec.ports[1]: port 80 is taken; spec.state: must be one of; document is empty"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	wrapped := fmt.Errorf("apply redis: %w", errs.Err())
	got, ok := From(wrapped)
	if !ok {
		t.Fatal("From did not find Errors in a wrapped error")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("From (-want +got):\n%s", diff)
	}
	if _, ok := From(errors.New("plain")); ok {
		t.Error("From found Errors in a plain error")
	}
}

// rule tests: each case is the input and a part of the message, "" for valid.
type ruleCase struct {
	in   string
	want string
}

func runRule(t *testing.T, rule func(string) string, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		name := c.in
		if len(name) > 20 {
			name = fmt.Sprintf("%s...len%d", name[:10], len(name))
		}
		t.Run(strings.NewReplacer(" ", "_", "/", "_").Replace(name), func(t *testing.T) {
			got := rule(c.in)
			switch {
			case c.want == "" && got != "":
				t.Errorf("rule(%q) = %q, want valid", c.in, got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("rule(%q) = %q, want it to contain %q", c.in, got, c.want)
			}
		})
	}
}

var (
	label63    = strings.Repeat("a", 63)
	name253    = strings.Repeat(label63+".", 3) + strings.Repeat("b", 61) // 4*63+... = 253
	name254    = name253 + "c"
	deepDomain = strings.Repeat("a.", 126) + "a" // 253 bytes of one-letter labels
)

func TestDNS1035Label(t *testing.T) {
	runRule(t, DNS1035Label, []ruleCase{
		{"redis", ""},
		{"my-name", ""},
		{"a", ""},
		{"abc-123", ""},
		{label63, ""},
		{"", "must not be empty"},
		{label63 + "a", "no more than 63 characters"},
		{"1redis", "DNS-1035 label"},
		{"-redis", "DNS-1035 label"},
		{"redis-", "DNS-1035 label"},
		{"Redis", "DNS-1035 label"},
		{"redis.demo", "DNS-1035 label"},
		{"redis_demo", "DNS-1035 label"},
	})
}

func TestDNS1123Label(t *testing.T) {
	runRule(t, DNS1123Label, []ruleCase{
		{"http", ""},
		{"123-abc", ""},
		{"8080", ""},
		{label63, ""},
		{"", "must not be empty"},
		{label63 + "a", "no more than 63"},
		{"-http", "DNS-1123 label"},
		{"http-", "DNS-1123 label"},
		{"HTTP", "DNS-1123 label"},
		{"a.b", "DNS-1123 label"},
	})
}

func TestDNS1123Subdomain(t *testing.T) {
	if len(name253) != 253 || len(deepDomain) != 253 {
		t.Fatalf("test names have the wrong length: %d, %d", len(name253), len(deepDomain))
	}
	runRule(t, DNS1123Subdomain, []ruleCase{
		{"example.com", ""},
		{"redis.demo-app.svc.mesh.east", ""},
		{"a", ""},
		{"1.2.3.4", ""},
		{label63 + ".mesh", ""},
		{name253, ""},
		{deepDomain, ""},
		{"", "must not be empty"},
		{name254, "no more than 253 characters"},
		// Kubernetes' check of the same name misses this one (kuma-facts 4.1).
		{label63 + "a.mesh", "labels of 1 to 63"},
		{"Example.com", "lower case"},
		{".example.com", "lower case"},
		{"example.com.", "lower case"},
		{"example..com", "lower case"},
		{"-example.com", "lower case"},
		{"example-.com", "lower case"},
		{"exa_mple.com", "lower case"},
		{"*.example.com", "lower case"},
		{"example.com\n", "lower case"},
	})
}

func TestLabelKey(t *testing.T) {
	runRule(t, LabelKey, []ruleCase{
		{"app", ""},
		{"kuma.io/zone", ""},
		{"k8s.kuma.io/is-headless-service", ""},
		{"statefulset.kubernetes.io/pod-name", ""},
		{"App_Name.v1", ""},
		{"a/" + label63, ""},
		{"", "name part must not be empty"},
		{"kuma.io/", "name part must not be empty"},
		{"/zone", "prefix must not be empty"},
		{"Kuma.io/zone", "prefix must be a lower case"},
		{"a/b/c", "prefix must be a lower case"},
		{"a/" + label63 + "a", "name part must be no more than 63"},
		{"bad key", "name part must consist of"},
		{"-app", "name part must consist of"},
		{"app.", "name part must consist of"},
	})
}

func TestLabelValue(t *testing.T) {
	runRule(t, LabelValue, []ruleCase{
		{"", ""},
		{"backend", ""},
		{"v1.2", ""},
		// seed 004: kuma.io/service values of Kubernetes services.
		{"frontend_default_svc_80", ""},
		{"UPPER", ""},
		{label63, ""},
		{label63 + "a", "no more than 63"},
		{"_x", "must consist of"},
		{"x-", "must consist of"},
		{"a b", "must consist of"},
		{"a/b", "must consist of"},
	})
}

func TestPort(t *testing.T) {
	for _, p := range []int{1, 80, 65535} {
		if msg := Port(p); msg != "" {
			t.Errorf("Port(%d) = %q, want valid", p, msg)
		}
	}
	for _, p := range []int{0, -1, 65536, 1 << 40} {
		if msg := Port(p); !strings.Contains(msg, fmt.Sprintf("between 1 and 65535, got %d", p)) {
			t.Errorf("Port(%d) = %q", p, msg)
		}
	}
}

func TestOneOf(t *testing.T) {
	if msg := OneOf("http", "tcp", "http"); msg != "" {
		t.Errorf("OneOf = %q, want valid", msg)
	}
	if got, want := OneOf("HTTP", "tcp", "http"), `must be one of "tcp", "http", got "HTTP"`; got != want {
		t.Errorf("OneOf = %q, want %q", got, want)
	}
	if got, want := OneOf("", "All", "None"), `must be one of "All", "None", got ""`; got != want {
		t.Errorf("OneOf = %q, want %q", got, want)
	}
}
