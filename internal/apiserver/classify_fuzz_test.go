package apiserver

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/auth"
	"github.com/meshnames/meshnames/internal/resource"
)

// FuzzClassify feeds the request classifier arbitrary methods and paths.
// It must never panic, and its answers hold the policy's assumptions: only
// /, /healthz and /readyz are public; a request that may write is never a
// Read (but the /_apply dry run); a mesh-scoped resource path names its
// mesh or is a list across every mesh.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"/", "/healthz", "/meshes", "/meshes/m1", "/meshes/m1/meshservices/x", "/meshservices",
		"/meshes/m1/meshservices/x/_hostnames", "/tokens/zone", "/tokens/abc", "/audit", "/history", "/_apply", "//meshes//",
		"/hostnamegenerators/g", "/meshes/m1/_dns", "/no/such", "/kuma/meshes"} {
		for _, m := range []string{"GET", "PUT", "DELETE", "POST"} {
			f.Add(m, s)
		}
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		u, err := url.Parse(path)
		if err != nil || method == "" || strings.ContainsAny(method, " \t\r\n") {
			return
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Method, r.URL = method, u
		a, route := classify(r)
		if route == "" {
			t.Fatal("no route")
		}
		trimmed := strings.Trim(u.Path, "/")
		if a.Class == auth.Public && trimmed != "" && trimmed != "healthz" && trimmed != "readyz" {
			t.Fatalf("%s %s classified public", method, path)
		}
		if writes(method) && a.Class == auth.Read && trimmed != "_apply" {
			t.Fatalf("%s %s may write but is classified a read", method, path)
		}
		if d, ok := resource.Lookup(a.Kind); ok && d.MeshScoped && a.Mesh == "" && !a.AllMeshes {
			t.Fatalf("%s %s: mesh-scoped %s without a mesh: %+v", method, path, a.Kind, a)
		}
	})
}

// A path with an empty mesh segment names no one mesh: it is authorized
// as across every mesh, never as a mesh of no name.
func TestClassify_EmptyMeshIsEveryMesh(t *testing.T) {
	for _, path := range []string{"/meshes//meshservices//_hostnames", "/meshes//dataplanes/dp/_xds", "/meshes//_dns", "/meshes//meshservices"} {
		r := httptest.NewRequest("GET", path, nil)
		a, _ := classify(r)
		if a.Mesh != "" || !a.AllMeshes {
			t.Errorf("GET %s: %+v, want every mesh", path, a)
		}
	}
	r := httptest.NewRequest("GET", "/meshes/m1/meshservices/x/_hostnames", nil)
	if a, _ := classify(r); a.Mesh != "m1" || a.AllMeshes {
		t.Errorf("GET /meshes/m1/meshservices/x/_hostnames: %+v, want mesh m1 alone", a)
	}
}
