package crd

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestManifests_Golden keeps the generated CRDs in testdata/crds.yaml, so
// that a change of a resource type shows as a change of the CRDs in review
// and CI fails when the two drift apart.
func TestManifests_Golden(t *testing.T) {
	got, err := Manifests(DefaultSystemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "crds.yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/crd -update)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("the CRDs differ from %s; run go test ./internal/crd -update (-want +got):\n%s", path, d)
	}
}

// TestKinds_EveryResourceKind: every kind meshnames stores has a CRD, so
// that the Kubernetes store can hold everything the others hold.
func TestKinds_EveryResourceKind(t *testing.T) {
	ks := Kinds()
	if len(ks) != len(resource.Descriptors()) {
		t.Fatalf("%d CRD kinds for %d resource kinds", len(ks), len(resource.Descriptors()))
	}
	for i, d := range resource.Descriptors() {
		k := ks[i]
		if k.Kind != d.Kind || k.Plural != d.Plural {
			t.Errorf("kind %d: %s/%s, want %s/%s", i, k.Kind, k.Plural, d.Kind, d.Plural)
		}
		if k.Namespaced == (d.Kind == resource.Mesh || d.Kind == resource.Zone) {
			t.Errorf("%s: namespaced = %v", k.Kind, k.Namespaced)
		}
		if k.SystemOnly != (d.Kind == resource.HostnameGenerator || d.Kind == resource.MeshExternalService || d.Kind == resource.ZoneIngress) {
			t.Errorf("%s: system namespace only = %v", k.Kind, k.SystemOnly)
		}
	}
}
