package install

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	yaml "go.yaml.in/yaml/v2"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func defaults() Options {
	return Options{Namespace: "meshnames-system", Replicas: 2, Image: "meshnames:test", Zone: "default", Version: "test"}
}

// TestManifests_Golden keeps the output of the default options and of a
// TLS API in testdata, so that a change of any object shows in review.
func TestManifests_Golden(t *testing.T) {
	tls := defaults()
	tls.Namespace, tls.Replicas, tls.Zone, tls.APITLSSecret = "mesh-system", 3, "east", "meshnames-api-tls"
	for name, o := range map[string]Options{"control-plane.yaml": defaults(), "control-plane-tls.yaml": tls} {
		t.Run(name, func(t *testing.T) {
			got, err := Manifests(o)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/install -update)", err)
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("the manifests differ from %s; run go test ./internal/install -update (-want +got):\n%s", path, d)
			}
		})
	}
}

// TestRBACManifests_DocsFile keeps docs/kubernetes-rbac.yaml equal to the
// roles the installation makes.
func TestRBACManifests_DocsFile(t *testing.T) {
	got, err := RBACManifests("meshnames-system")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "kubernetes-rbac.yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs from the installation's RBAC; run go test ./internal/install -update (-want +got):\n%s", path, d)
	}
}

func TestOptions_ValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"namespace", func(o *Options) { o.Namespace = "Mesh_System" }, "--namespace"},
		{"no-replicas", func(o *Options) { o.Replicas = 0 }, "--replicas: must be between 1 and 100, got 0"},
		{"image", func(o *Options) { o.Image = "" }, "--image: must not be empty"},
		{"zone", func(o *Options) { o.Zone = "" }, "--zone"},
		{"secret", func(o *Options) { o.APITLSSecret = "Not A Name" }, "--api-tls-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults()
			tc.edit(&o)
			_, err := Manifests(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
	if err := defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// TestRBAC_LeastPrivilege: the Lease rule is a Role of the
// system namespace, never in the ClusterRole, and nothing grants a
// wildcard.
func TestRBAC_LeastPrivilege(t *testing.T) {
	for _, doc := range RBAC("ns", nil) {
		out := strings.Join(strings.Fields(strings.ReplaceAll(strings.ReplaceAll(toYAML(t, doc), "\n", " "), "- ", "")), " ")
		if strings.Contains(out, "*") {
			t.Errorf("a wildcard: %s", out)
		}
		kind := doc[1].Value
		if kind == "ClusterRole" && strings.Contains(out, "leases") {
			t.Errorf("the ClusterRole grants leases: %s", out)
		}
		if kind == "Role" && !strings.Contains(out, "namespace: ns") {
			t.Errorf("the Role is not in the system namespace: %s", out)
		}
	}
}

func toYAML(t *testing.T, doc m) string {
	t.Helper()
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
