package apiserver

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
)

// TestApply_DryRun checks POST /_apply?dryRun=true: every item is admitted
// as a PUT would be, the report says what each write would do or why it
// cannot be made, and nothing is written.
func TestApply_DryRun(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	if r := e.put("/meshes/default/meshservices/redis", redis); r.code != http.StatusCreated {
		t.Fatalf("PUT redis = %d: %s", r.code, r.body)
	}
	body := `{"items": [
	  {"type": "Mesh", "name": "staging"},
	  {"type": "MeshService", "mesh": "staging", "name": "api", "spec": {"ports": [{"port": 80}]}},
	  {"type": "MeshService", "mesh": "default", "name": "redis", "labels": {"team": "storage"}, "spec": {"ports": [{"port": 6379, "appProtocol": "tcp"}]}},
	  {"type": "MeshService", "mesh": "default", "name": "redis", "labels": {"team": "cache"}, "spec": {"ports": [{"port": 6379, "appProtocol": "tcp"}]}},
	  {"type": "MeshService", "mesh": "nomesh", "name": "x", "spec": {"ports": [{"port": 0}]}},
	  {"type": "MeshService", "mesh": "default", "name": "forged", "labels": {"kuma.io/zone": "west"}, "spec": {"ports": [{"port": 80}]}}
	]}`
	r := e.do(http.MethodPost, "/_apply?dryRun=true", "application/json", body)
	if r.code != http.StatusOK {
		t.Fatalf("POST /_apply = %d: %s", r.code, r.body)
	}
	var rep api.ApplyReport
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Result string
		Fields []string
	}
	var got []row
	for _, it := range rep.Items {
		var fields []string
		for _, c := range it.Causes {
			fields = append(fields, c.Field)
		}
		got = append(got, row{it.Result, fields})
	}
	want := []row{
		{Result: "created"},
		{Result: "created"}, // its mesh is created by the same batch
		{Result: "unchanged"},
		{Result: "updated"},
		{Fields: []string{"spec.ports[0].port", "mesh"}},
		{Fields: []string{`labels["kuma.io/zone"]`}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
	if rep.Problems != 2 {
		t.Errorf("problems = %d, want 2", rep.Problems)
	}
	if r := e.do(http.MethodGet, "/meshes/staging", "", ""); r.code != http.StatusNotFound {
		t.Errorf("a dry run created the mesh: GET = %d", r.code)
	}
	if r := e.do(http.MethodGet, "/meshes/default/meshservices/redis", "", ""); r.code != http.StatusOK || !json.Valid(r.body) {
		t.Fatalf("GET redis = %d", r.code)
	} else if obj, _ := resource.Decode(r.body); obj.Labels["team"] != "storage" {
		t.Errorf("a dry run changed redis: labels %v", obj.Labels)
	}

	for _, bad := range []struct{ name, query, body string }{
		{"not-a-dry-run", "", `{"items": []}`},
		{"not-json", "?dryRun=true", `items: []`},
	} {
		if r := e.do(http.MethodPost, "/_apply"+bad.query, "application/json", bad.body); r.code != http.StatusBadRequest {
			t.Errorf("%s: POST /_apply = %d, want 400: %s", bad.name, r.code, r.body)
		}
	}
	if r := e.do(http.MethodGet, "/_apply", "", ""); r.code != http.StatusMethodNotAllowed {
		t.Errorf("GET /_apply = %d, want 405", r.code)
	}
}

// TestApply_DryRunOnGlobal reports kinds another control plane owns.
func TestApply_DryRunOnGlobal(t *testing.T) {
	e := newEnv(t, resource.ModeGlobal)
	r := e.do(http.MethodPost, "/_apply?dryRun=true", "application/json",
		`{"items": [{"type": "MeshService", "mesh": "default", "name": "a", "spec": {"ports": [{"port": 80}]}}]}`)
	var rep api.ApplyReport
	if err := json.Unmarshal(r.body, &rep); err != nil || r.code != http.StatusOK {
		t.Fatalf("POST /_apply = %d: %s", r.code, r.body)
	}
	if rep.Problems != 1 || rep.Items[0].Error == "" {
		t.Errorf("report = %+v, want the MeshService refused", rep)
	}
}
