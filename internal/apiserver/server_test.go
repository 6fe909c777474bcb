package apiserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

type env struct {
	t   *testing.T
	srv *httptest.Server
	st  store.Store
}

// storeWithDefaultMesh opens an embedded store holding the mesh "default".
func storeWithDefaultMesh(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := store.Create(context.Background(), st, &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}); err != nil {
		t.Fatal(err)
	}
	return st
}

// newEnv runs the API over a real embedded store and cache, with the mesh
// "default" created.
func newEnv(t *testing.T, mode string) *env {
	t.Helper()
	st := storeWithDefaultMesh(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := cache.New(st, log, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitSynced(t, c)
	api := New(Options{Cache: c, Admission: admission.New(admission.Options{Store: st, Cache: c, Mode: mode, Zone: "east"}), Log: log, Registry: prometheus.NewRegistry(), Version: "test"})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, st: st}
}

func waitSynced(t *testing.T, c *cache.Cache) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for synced, _ := c.Status(); !synced; synced, _ = c.Status() {
		if time.Now().After(deadline) {
			t.Fatal("cache did not sync")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type reply struct {
	code    int
	header  http.Header
	body    []byte
	trailer http.Header
}

func (r reply) error() Error {
	var e Error
	_ = json.Unmarshal(r.body, &e)
	return e
}

func (r reply) causeFields() []string {
	var out []string
	for _, c := range r.error().Causes {
		out = append(out, c.Field)
	}
	slices.Sort(out)
	return out
}

func (e *env) do(method, path, contentType, body string, headers ...string) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, header: resp.Header, body: b, trailer: resp.Trailer}
}

func (e *env) put(path, body string, headers ...string) reply {
	return e.do(http.MethodPut, path, "application/yaml", body, headers...)
}

const redis = `type: MeshService
name: redis
mesh: default
labels:
  team: storage
spec:
  ports:
  - port: 6379
    appProtocol: tcp
`

func TestPut_CreateUpdateUnchanged(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	path := "/meshes/default/meshservices/redis"

	r := e.put(path, redis)
	if r.code != http.StatusCreated || r.header.Get(ResultHeader) != ResultCreated || r.header.Get("ETag") != `"1"` {
		t.Fatalf("create: %d %s etag %s: %s", r.code, r.header.Get(ResultHeader), r.header.Get("ETag"), r.body)
	}
	r = e.put(path, redis)
	if r.code != http.StatusOK || r.header.Get(ResultHeader) != ResultUnchanged || r.header.Get("ETag") != `"1"` {
		t.Fatalf("same document again: %d %s etag %s", r.code, r.header.Get(ResultHeader), r.header.Get("ETag"))
	}
	r = e.put(path, strings.Replace(redis, "6379", "6380", 1))
	if r.code != http.StatusOK || r.header.Get(ResultHeader) != ResultUpdated || r.header.Get("ETag") != `"2"` {
		t.Fatalf("update: %d %s etag %s", r.code, r.header.Get(ResultHeader), r.header.Get("ETag"))
	}
	// Read your write: the GET right after the PUT sees it.
	r = e.do(http.MethodGet, path, "", "")
	var got resource.Object
	if err := json.Unmarshal(r.body, &got); err != nil || r.code != http.StatusOK {
		t.Fatalf("get: %d %v %s", r.code, err, r.body)
	}
	if p := got.Spec.(*resource.MeshServiceSpec).Ports[0].Port; p != 6380 {
		t.Errorf("GET after update: port %d, want 6380", p)
	}
	wantLabels := map[string]string{"team": "storage", resource.LabelOrigin: "zone", resource.LabelZone: "east",
		resource.LabelDisplayName: "redis", resource.LabelMesh: "default"}
	if d := cmp.Diff(wantLabels, got.Labels); d != "" {
		t.Errorf("system labels (-want +got):\n%s", d)
	}
}

func TestPut_JSONAndPathDefaults(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	// name and mesh may be left out of the body; status is ignored.
	r := e.do(http.MethodPut, "/meshes/default/meshservices/web", "application/json",
		`{"type":"MeshService","spec":{"ports":[{"port":80}]},"status":{"vips":[{"ip":"1.2.3.4","type":"Kuma"}]},"creationTime":"2020-01-01T00:00:00Z"}`)
	if r.code != http.StatusCreated {
		t.Fatalf("PUT = %d %s", r.code, r.body)
	}
	var got resource.Object
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "web" || got.Mesh != "default" || got.Status != nil || got.CreationTime.Year() == 2020 {
		t.Errorf("stored %+v; want name/mesh from the path, no status, server creation time", got)
	}
	if p := got.Spec.(*resource.MeshServiceSpec).Ports[0].AppProtocol; p != "tcp" {
		t.Errorf("appProtocol default = %q, want tcp", p)
	}
}

func TestErrors(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	e.put("/meshes/default/meshservices/redis", redis)
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		headers     []string
		code        int
		fields      []string
	}{
		{name: "invalid-spec-all-violations", method: "PUT", path: "/meshes/default/meshservices/bad", contentType: "application/yaml",
			body: "type: MeshService\nspec:\n  ports:\n  - port: 0\n    appProtocol: udp\n  - port: 70000\n", code: 400,
			fields: []string{"spec.ports[0].appProtocol", "spec.ports[0].port", "spec.ports[1].port"}},
		{name: "unknown-field", method: "PUT", path: "/meshes/default/meshservices/bad", contentType: "application/yaml",
			body: "type: MeshService\nspec:\n  bogus: 1\n", code: 400, fields: []string{"spec.bogus"}},
		{name: "syntax-error", method: "PUT", path: "/meshes/default/meshservices/bad", contentType: "application/json",
			body: `{"type": "MeshService",`, code: 400, fields: []string{"document"}},
		{name: "wrong-kind-for-path", method: "PUT", path: "/meshes/default/meshservices/bad", contentType: "application/yaml",
			body: "type: Dataplane\nspec: {}\n", code: 400, fields: []string{"type"}},
		{name: "name-mismatch", method: "PUT", path: "/meshes/default/meshservices/bad", contentType: "application/yaml",
			body: "type: MeshService\nname: other\nspec: {}\n", code: 400, fields: []string{"name"}},
		{name: "invalid-name", method: "PUT", path: "/meshes/default/meshservices/Bad_Name", contentType: "application/yaml",
			body: "type: MeshService\nspec: {}\n", code: 400, fields: []string{"name"}},
		{name: "missing-mesh", method: "PUT", path: "/meshes/nope/meshservices/x", contentType: "application/yaml",
			body: "type: MeshService\nspec: {}\n", code: 400, fields: []string{"mesh"}},
		{name: "forged-origin-and-zone", method: "PUT", path: "/meshes/default/meshservices/x", contentType: "application/yaml",
			body: "type: MeshService\nlabels:\n  kuma.io/origin: global\n  kuma.io/zone: west\nspec: {}\n", code: 400,
			fields: []string{`labels["kuma.io/origin"]`, `labels["kuma.io/zone"]`}},
		{name: "bad-if-match", method: "PUT", path: "/meshes/default/meshservices/redis", contentType: "application/yaml",
			body: redis, headers: []string{"If-Match", "abc"}, code: 400, fields: []string{"If-Match"}},
		{name: "bad-size", method: "GET", path: "/meshes/default/meshservices?size=5000", code: 400, fields: []string{"size"}},
		{name: "bad-offset", method: "GET", path: "/meshes/default/meshservices?offset=-1", code: 400, fields: []string{"offset"}},
		{name: "non-label-filter", method: "GET", path: "/meshes/default/meshservices?filter%5Bname%5D=x", code: 400, fields: []string{"filter[name]"}},
		{name: "missing-resource", method: "GET", path: "/meshes/default/meshservices/nope", code: 404},
		{name: "delete-missing", method: "DELETE", path: "/meshes/default/meshservices/nope", code: 404},
		{name: "unknown-collection", method: "GET", path: "/meshes/default/widgets", code: 404},
		{name: "global-kind-under-mesh", method: "GET", path: "/meshes/default/hostnamegenerators", code: 404},
		{name: "list-in-missing-mesh", method: "GET", path: "/meshes/nope/meshservices", code: 404},
		{name: "mesh-scoped-kind-without-mesh", method: "GET", path: "/meshservices/redis", code: 404},
		{name: "unknown-path", method: "GET", path: "/nope/a/b/c/d", code: 404},
		{name: "post-not-allowed", method: "POST", path: "/meshes/default/meshservices/redis", code: 405},
		{name: "put-on-list", method: "PUT", path: "/meshes/default/meshservices", code: 405},
		{name: "stale-if-match", method: "PUT", path: "/meshes/default/meshservices/redis", contentType: "application/yaml",
			body: strings.Replace(redis, "6379", "1", 1), headers: []string{"If-Match", `"7"`}, code: 409},
		{name: "if-match-on-missing", method: "PUT", path: "/meshes/default/meshservices/new", contentType: "application/yaml",
			body: "type: MeshService\nspec: {}\n", headers: []string{"If-Match", `"1"`}, code: 409},
		{name: "stale-if-match-delete", method: "DELETE", path: "/meshes/default/meshservices/redis", headers: []string{"If-Match", `"9"`}, code: 409},
		{name: "delete-mesh-with-resources", method: "DELETE", path: "/meshes/default", code: 409},
		{name: "body-too-large", method: "PUT", path: "/meshes/default/meshservices/big", contentType: "application/yaml",
			body: "type: MeshService\nspec: {}\n#" + strings.Repeat("x", DefaultMaxBodyBytes), code: 413},
		{name: "unsupported-content-type", method: "PUT", path: "/meshes/default/meshservices/redis", contentType: "text/plain", body: redis, code: 415},
		{name: "form-content-type", method: "PUT", path: "/meshes/default/meshservices/redis", contentType: "application/x-www-form-urlencoded", body: redis, code: 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, tt.contentType, tt.body, tt.headers...)
			if r.code != tt.code {
				t.Fatalf("%s %s = %d, want %d: %s", tt.method, tt.path, r.code, tt.code, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("error Content-Type = %q, want application/json", ct)
			}
			got := r.error()
			if got.Status != tt.code || got.Title == "" {
				t.Errorf("error body %s: want status %d and a title", r.body, tt.code)
			}
			// Kuma's fields beside ours: kumactl prints these.
			if got.Type != ErrorType || got.Details != got.Detail {
				t.Errorf("error body %s: want type %q and details equal to detail", r.body, ErrorType)
			}
			var params []string
			for i, p := range got.InvalidParameters {
				params = append(params, p.Field)
				if p.Reason != got.Causes[i].Message {
					t.Errorf("invalid_parameters[%d].reason = %q, want the cause's message %q", i, p.Reason, got.Causes[i].Message)
				}
			}
			slices.Sort(params)
			if d := cmp.Diff(tt.fields, params); d != "" {
				t.Errorf("invalid_parameters fields (-want +got):\n%s\nbody: %s", d, r.body)
			}
			if tt.fields != nil {
				if d := cmp.Diff(tt.fields, r.causeFields()); d != "" {
					t.Errorf("cause fields (-want +got):\n%s\nbody: %s", d, r.body)
				}
			}
		})
	}
	// None of the rejected writes changed anything.
	objs, _, err := e.st.List(context.Background(), resource.MeshService)
	if err != nil || len(objs) != 1 || objs[0].Name != "redis" || objs[0].Version != 1 {
		t.Errorf("after rejected writes the store holds %v (%v); want only redis at version 1", objs, err)
	}
}

func TestReadOnlyKinds(t *testing.T) {
	tests := []struct {
		mode, path, body string
	}{
		{resource.ModeGlobal, "/meshes/default/meshservices/x", "type: MeshService\nspec: {}\n"},
		{resource.ModeGlobal, "/meshes/default/dataplanes/x", "type: Dataplane\nspec: {}\n"},
		{resource.ModeGlobal, "/zoneingresses/x", "type: ZoneIngress\nnetworking: {address: 10.0.0.1, port: 10001}\n"},
		{resource.ModeZone, "/meshes/default/meshmultizoneservices/x", "type: MeshMultiZoneService\nspec: {}\n"},
		{resource.ModeZone, "/meshes/x", "type: Mesh\n"},
		{resource.ModeZone, "/zones/x", "type: Zone\n"},
	}
	for _, tt := range tests {
		t.Run(tt.mode+tt.path, func(t *testing.T) {
			e := newEnv(t, tt.mode)
			if r := e.put(tt.path, tt.body); r.code != http.StatusMethodNotAllowed {
				t.Errorf("PUT %s on %s = %d, want 405: %s", tt.path, tt.mode, r.code, r.body)
			}
			if r := e.do(http.MethodDelete, tt.path, "", ""); r.code != http.StatusMethodNotAllowed {
				t.Errorf("DELETE %s on %s = %d, want 405", tt.path, tt.mode, r.code)
			}
		})
	}
}

func TestGlobalMode_Labels(t *testing.T) {
	e := newEnv(t, resource.ModeGlobal)
	r := e.put("/hostnamegenerators/all", "type: HostnameGenerator\nspec:\n  selector:\n    meshService: {}\n  template: '{{ .Name }}.mesh'\n")
	if r.code != http.StatusCreated {
		t.Fatalf("PUT = %d %s", r.code, r.body)
	}
	var got resource.Object
	_ = json.Unmarshal(r.body, &got)
	if got.Labels[resource.LabelOrigin] != resource.OriginGlobal || got.Labels[resource.LabelZone] != "" {
		t.Errorf("labels on global = %v; want origin global and no zone", got.Labels)
	}
}

func TestDelete_ThenGone(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	e.put("/meshes/default/meshservices/redis", redis)
	if r := e.do(http.MethodDelete, "/meshes/default/meshservices/redis", "", "", "If-Match", `"1"`); r.code != http.StatusOK {
		t.Fatalf("DELETE = %d %s", r.code, r.body)
	}
	if r := e.do(http.MethodGet, "/meshes/default/meshservices/redis", "", ""); r.code != http.StatusNotFound {
		t.Errorf("GET after DELETE = %d, want 404", r.code)
	}
	// The now empty mesh can be deleted.
	if r := e.do(http.MethodDelete, "/meshes/default", "", ""); r.code != http.StatusOK {
		t.Errorf("DELETE empty mesh = %d %s", r.code, r.body)
	}
}

func TestGet_YAMLOnRequest(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	e.put("/meshes/default/meshservices/redis", redis)
	r := e.do(http.MethodGet, "/meshes/default/meshservices/redis", "", "", "Accept", "application/yaml")
	if r.header.Get("Content-Type") != "application/yaml" || !strings.Contains(string(r.body), "name: redis") {
		t.Errorf("GET with Accept yaml: %s\n%s", r.header.Get("Content-Type"), r.body)
	}
	obj, err := resource.Decode(r.body)
	if err != nil || obj.Name != "redis" {
		t.Errorf("YAML answer does not decode as a document: %v", err)
	}
}

func TestStoreUnavailable_503(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	e.st.Close()
	r := e.put("/meshes/default/meshservices/redis", redis)
	if r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Errorf("PUT with the store closed = %d (Retry-After %q), want 503", r.code, r.header.Get("Retry-After"))
	}
	// Reads keep working from the cache.
	if r := e.do(http.MethodGet, "/meshes/default", "", ""); r.code != http.StatusOK {
		t.Errorf("GET with the store closed = %d, want 200 from the cache", r.code)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/": 200} {
		if r := e.do(http.MethodGet, path, "", ""); r.code != want {
			t.Errorf("GET %s = %d, want %d", path, r.code, want)
		}
	}
	e.put("/meshes/default/meshservices/redis", redis)
	r := e.do(http.MethodGet, "/metrics", "", "")
	if !strings.Contains(string(r.body), `meshnames_api_requests_total{code="201",method="PUT",route="/meshes/{mesh}/meshservices/{name}"} 1`) {
		t.Errorf("metrics lack the PUT counter:\n%s", r.body)
	}
}

// TestPut_StaleCacheNeverLosesAWrite freezes the cache, changes the store
// behind its back (as another instance would), and checks that PUTs still
// land: a document equal to the stale cached copy is not mistaken for
// "unchanged", and a create over an unseen resource becomes an update.
func TestPut_StaleCacheNeverLosesAWrite(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := store.Create(ctx, st, &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := cache.New(st, log, nil)
	cctx, stopCache := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.Run(cctx); close(done) }()
	waitSynced(t, c)
	api := New(Options{Cache: c, Admission: admission.New(admission.Options{Store: st, Cache: c, Mode: resource.ModeStandalone, Zone: "east"}), Log: log, WriteWait: 50 * time.Millisecond})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv, st: st}

	if r := e.put("/meshes/default/meshservices/redis", redis); r.code != http.StatusCreated {
		t.Fatalf("create = %d %s", r.code, r.body)
	}
	stopCache() // the cache now holds redis at version 1 and learns nothing more
	<-done

	// Another instance changes the port to 7000.
	cur, err := st.Get(ctx, resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "redis"})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 7000
	if _, err := store.Update(ctx, st, cur); err != nil {
		t.Fatal(err)
	}
	// Putting back the original document must restore 6379, although the
	// stale cache says it is already so.
	r := e.put("/meshes/default/meshservices/redis", redis)
	if r.code != http.StatusOK || r.header.Get(ResultHeader) != ResultUpdated {
		t.Errorf("PUT over a stale cache = %d %s, want 200 updated", r.code, r.header.Get(ResultHeader))
	}
	got, _ := st.Get(ctx, cur.Key())
	if p := got.Spec.(*resource.MeshServiceSpec).Ports[0].Port; p != 6379 {
		t.Errorf("stored port = %d, want 6379", p)
	}

	// Another instance creates web; the cache never sees it. A PUT is an update.
	web := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "web", Spec: &resource.MeshServiceSpec{}}
	if err := admission.New(admission.Options{Mode: resource.ModeStandalone, Zone: "east"}).Admit(web, admission.Writer{Source: admission.System}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, st, web); err != nil {
		t.Fatal(err)
	}
	r = e.put("/meshes/default/meshservices/web", "type: MeshService\nspec:\n  ports:\n  - port: 80\n")
	if r.code != http.StatusOK || r.header.Get(ResultHeader) != ResultUpdated {
		t.Errorf("PUT of a resource the cache never saw = %d %s, want 200 updated", r.code, r.header.Get(ResultHeader))
	}
}

func TestPut_PreferMinimal(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	r := e.put("/meshes/default/meshservices/redis", redis, "Prefer", "return=minimal")
	if r.code != http.StatusCreated || len(r.body) != 0 || r.header.Get(ResultHeader) != ResultCreated ||
		r.header.Get("ETag") != `"1"` || r.header.Get("Preference-Applied") != "return=minimal" {
		t.Errorf("minimal PUT = %d, body %q, headers %v", r.code, r.body, r.header)
	}
	// Errors keep their body.
	r = e.put("/meshes/default/meshservices/redis", "type: MeshService\nspec:\n  ports:\n  - port: 0\n", "Prefer", "return=minimal")
	if r.code != http.StatusBadRequest || len(r.error().Causes) != 1 {
		t.Errorf("invalid minimal PUT = %d %s; want 400 with causes", r.code, r.body)
	}
}

// TestPut_Warnings checks seed 003's tcp note reaches the client: a valid
// document that captures more than it says is stored, and the response
// carries a Warning header (RFC 9110 section 11.5 form, code 299) per note.
func TestPut_Warnings(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	path := "/meshes/default/meshexternalservices/kafka"
	doc := "type: MeshExternalService\nspec:\n  match:\n  - {type: Domain, value: kafka.example.com, port: 9092, protocol: tcp}\n"
	want := []string{`299 - "spec.match[0].protocol: tcp cannot tell domains apart, so this match captures all traffic to port 9092, not only kafka.example.com; use tls or an HTTP protocol, or match an IP, CIDR or InternalVIP"`}
	for _, h := range [][]string{nil, {"Prefer", "return=minimal"}} {
		r := e.put(path, doc, h...)
		if r.code != http.StatusCreated && r.code != http.StatusOK {
			t.Fatalf("PUT %v = %d %s", h, r.code, r.body)
		}
		if d := cmp.Diff(want, r.header.Values("Warning")); d != "" {
			t.Errorf("Warning headers with %v (-want +got):\n%s", h, d)
		}
	}
	r := e.put(path, strings.Replace(doc, "protocol: tcp", "protocol: tls", 1))
	if r.code != http.StatusOK || len(r.header.Values("Warning")) != 0 {
		t.Errorf("tls match: %d, Warning %q; want 200 and none", r.code, r.header.Values("Warning"))
	}
}

// Before the cache has loaded the store, resource requests wait for it
// (rather than answer that the default mesh does not exist), and give up
// with 503 and Retry-After when the load takes longer than they may wait.
func TestAPI_WaitsForTheFirstLoad(t *testing.T) {
	st := storeWithDefaultMesh(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := cache.New(st, log, nil) // not running yet
	api := New(Options{Cache: c, Admission: admission.New(admission.Options{Store: st, Cache: c, Mode: "standalone", Zone: "east"}), Log: log, Registry: prometheus.NewRegistry(), Version: "test"})
	// arrived tells that a request reached the API, which cannot answer
	// before the cache (not running) has loaded.
	arrived := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		api.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	get := func(ctx context.Context, path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return srv.Client().Do(req)
	}
	// The client gives up first: the server answers 503 once the
	// request's context ends.
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(short, http.MethodGet, srv.URL+"/meshes/default", nil)
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("GET before the load = %d (Retry-After %q), want 503", rec.Code, rec.Header().Get("Retry-After"))
	}
	if resp, err := get(context.Background(), "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz before the load: %v %v", resp, err)
	}
	<-arrived // the /healthz request

	// A request made while the cache loads is answered once it has.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	answered := make(chan int, 1)
	go func() {
		resp, err := get(context.Background(), "/meshes/default")
		if err != nil {
			t.Error(err)
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-arrived // the request waits in the API: only now does the load start
	go func() { c.Run(ctx); close(done) }()
	if code := <-answered; code != http.StatusOK {
		t.Errorf("GET /meshes/default during the load = %d, want 200", code)
	}
}
