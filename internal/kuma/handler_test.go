package kuma

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// env runs the real API (embedded store, cache, native handler) with the
// adapter mounted, as the server does.
type env struct {
	t   testing.TB
	url string
	st  store.Store
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, resource.ModeStandalone, nil)
}

// newEnvWith is newEnv for a control plane of mode, with tune changing the
// native API's options and objs stored beside the default mesh.
func newEnvWith(t testing.TB, mode string, tune func(*apiserver.Options), objs ...*resource.Object) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, o := range append([]*resource.Object{{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}}, objs...) {
		if _, err := store.Create(context.Background(), st, o); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := cache.New(st, log, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !c.WaitSynced(wctx) {
		t.Fatal("cache did not load")
	}
	zone := "east"
	if mode == resource.ModeGlobal {
		zone = ""
	}
	adm := admission.New(admission.Options{Store: st, Cache: c, Mode: mode, Zone: zone})
	opts := apiserver.Options{Cache: c, Admission: adm, Log: log, Registry: prometheus.NewRegistry(), Version: "1.2.3"}
	if tune != nil {
		tune(&opts)
	}
	api := apiserver.New(opts)
	srv := httptest.NewServer(Mount(api.Handler(), apiserver.DefaultMaxBodyBytes))
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, st: st}
}

type reply struct {
	code   int
	header http.Header
	body   []byte
}

// do sends a request as kumactl does: JSON bodies, Accept JSON.
func (e *env) do(method, path, body string, header ...string) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, header: resp.Header, body: b}
}

func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
}

func (e *env) stored(k resource.Key) *resource.Object {
	e.t.Helper()
	o, err := e.st.Get(context.Background(), k)
	if err != nil {
		e.t.Fatalf("Get %s: %v", k, err)
	}
	return o
}

// The documents kumactl sends (kri and snis included), one per kind.
var kumaDocs = []struct {
	path string
	key  resource.Key
	doc  string
}{
	{"/kuma/meshes/payments", resource.Key{Kind: resource.Mesh, Name: "payments"}, `{"type":"Mesh","name":"payments","kri":"kri_m____payments_"}`},
	{"/kuma/zones/west", resource.Key{Kind: resource.Zone, Name: "west"}, `{"type":"Zone","name":"west","enabled":false}`},
	{"/kuma/meshes/default/dataplanes/redis-1", resource.Key{Kind: resource.Dataplane, Mesh: "default", Name: "redis-1"},
		`{"type":"Dataplane","mesh":"default","name":"redis-1","kri":"kri_dp_default___redis-1_","labels":{"app":"redis"},"networking":{"address":"10.0.0.12","inbound":[{"port":16379,"servicePort":6379,"name":"main"}]}}`},
	{"/kuma/meshes/default/meshservices/redis", resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "redis"},
		`{"type":"MeshService","mesh":"default","name":"redis","kri":"kri_msvc_default___redis_","snis":[{"port":6379,"sni":"sni.msvc.default.redis.main"}],"labels":{"team":"storage"},"spec":{"selector":{"dataplaneLabels":{"matchLabels":{"app":"redis"}}},"ports":[{"name":"main","port":6379,"targetPort":"main","appProtocol":"tcp"}]}}`},
	{"/kuma/meshes/default/meshexternalservices/httpbin", resource.Key{Kind: resource.MeshExternalService, Mesh: "default", Name: "httpbin"},
		`{"type":"MeshExternalService","mesh":"default","name":"httpbin","kri":"x","snis":[],"spec":{"match":{"type":"HostnameGenerator","port":443,"protocol":"http"},"endpoints":[{"address":"httpbin.org","port":443}],"tls":{"enabled":true,"verification":{"mode":"SkipSAN","subjectAltNames":[{"type":"Exact","value":"httpbin.org"}]}}}}`},
	{"/kuma/meshes/default/meshmultizoneservices/redis-global", resource.Key{Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "redis-global"},
		`{"type":"MeshMultiZoneService","mesh":"default","name":"redis-global","spec":{"selector":{"meshService":{"matchLabels":{"app":"redis"}}},"ports":[{"port":6379,"appProtocol":"tcp"}]}}`},
	{"/kuma/hostnamegenerators/by-team", resource.Key{Kind: resource.HostnameGenerator, Name: "by-team"},
		`{"type":"HostnameGenerator","name":"by-team","spec":{"selector":{"meshService":{"matchLabels":{"team":"storage"}}},"template":"{{ .DisplayName }}.{{ label \"team\" }}.mesh"}}`},
	{"/kuma/zoneingresses/ingress-1", resource.Key{Kind: resource.ZoneIngress, Name: "ingress-1"},
		`{"type":"ZoneIngress","name":"ingress-1","zone":"east","networking":{"address":"192.168.0.1","advertisedAddress":"10.0.0.1","port":10001,"advertisedPort":10000}}`},
}

// Every kind written through the adapter as kumactl sends it, read back,
// listed, sent back unchanged (which stores nothing new) and deleted.
func TestAdapter_EveryKind(t *testing.T) {
	e := newEnv(t)
	for _, d := range kumaDocs {
		t.Run(string(d.key.Kind), func(t *testing.T) {
			r := e.do(http.MethodPut, d.path, d.doc)
			if r.code != http.StatusCreated {
				t.Fatalf("PUT %s = %d %s", d.path, r.code, r.body)
			}
			var put PutResult
			r.json(t, &put)
			if put.Warnings == nil {
				t.Errorf("PUT body %s: want a warnings list", r.body)
			}
			before := e.stored(d.key)

			r = e.do(http.MethodGet, d.path, "")
			if r.code != http.StatusOK {
				t.Fatalf("GET %s = %d %s", d.path, r.code, r.body)
			}
			var got map[string]any
			r.json(t, &got)
			if got["type"] != string(d.key.Kind) || got["name"] != d.key.Name || got["meshnames"] != nil {
				t.Errorf("GET %s = %s; want the whole %s", d.path, r.body, d.key.Kind)
			}
			if _, flat := got["spec"]; flat == (d.key.Kind == resource.Mesh || d.key.Kind == resource.Zone || d.key.Kind == resource.Dataplane || d.key.Kind == resource.ZoneIngress) {
				t.Errorf("GET %s = %s: Meshes, Zones, Dataplanes and ZoneIngresses are flat, the others have spec", d.path, r.body)
			}

			// What kumactl read, applied again: nothing changes.
			if r := e.do(http.MethodPut, d.path, string(r.body)); r.code != http.StatusOK {
				t.Fatalf("PUT back = %d %s", r.code, r.body)
			}
			if after := e.stored(d.key); after.Version != before.Version {
				t.Errorf("sending back what was read changed the stored %s: version %d -> %d", d.key, before.Version, after.Version)
			}

			list := strings.TrimSuffix(d.path, "/"+d.key.Name)
			r = e.do(http.MethodGet, list+"?name="+d.key.Name, "")
			var page List
			r.json(t, &page)
			if r.code != http.StatusOK || page.Total != 1 || len(page.Items) != 1 {
				t.Errorf("GET %s?name= = %d %s; want one item", list, r.code, r.body)
			}
		})
	}
	// Cross-mesh lists, paged, with next at the adapter's path.
	r := e.do(http.MethodGet, "/kuma/meshservices?size=1", "")
	var page List
	r.json(t, &page)
	if page.Total != 1 || page.Next != nil {
		t.Errorf("GET /kuma/meshservices = %s; want the one service and no next page", r.body)
	}
	r = e.do(http.MethodGet, "/kuma/meshes?size=1", "")
	r.json(t, &page)
	if page.Total != 2 || page.Next == nil || !strings.Contains(*page.Next, "/kuma/meshes?") {
		t.Errorf("GET /kuma/meshes?size=1 = %s; want 2 meshes and a next page under /kuma", r.body)
	} else if r := e.do(http.MethodGet, strings.TrimPrefix(*page.Next, e.url), ""); r.code != http.StatusOK || !strings.Contains(string(r.body), `"payments"`) {
		t.Errorf("next page = %d %s", r.code, r.body)
	}
	for _, d := range slices.Backward(kumaDocs) {
		if r := e.do(http.MethodDelete, d.path, ""); r.code != http.StatusOK || strings.TrimSpace(string(r.body)) != "{}" {
			t.Errorf("DELETE %s = %d %s", d.path, r.code, r.body)
		}
		if r := e.do(http.MethodGet, d.path, ""); r.code != http.StatusNotFound {
			t.Errorf("GET %s after DELETE = %d", d.path, r.code)
		}
	}
}

// kumaError is the error body as kumactl reads it.
type kumaError struct {
	Type              string                 `json:"type"`
	Status            int                    `json:"status"`
	Title             string                 `json:"title"`
	Detail            string                 `json:"detail"`
	Details           string                 `json:"details"`
	InvalidParameters []api.InvalidParameter `json:"invalid_parameters"`
}

func fields(e kumaError) []string {
	var out []string
	for _, p := range e.InvalidParameters {
		out = append(out, p.Field)
	}
	return out
}

// Errors through the adapter are in Kuma's shape, and the violations of the
// native write path are named at their place in the Kuma document.
func TestAdapter_Errors(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, method, path, body string
		code                     int
		fields                   []string
	}{
		{"NativeRulesAtKumaPaths", "PUT", "/kuma/meshes/default/meshexternalservices/x",
			`{"type":"MeshExternalService","name":"x","mesh":"default","spec":{"match":{"port":0},"endpoints":[{"address":"a b","port":443}]}}`,
			400, []string{"spec.match.port", "spec.endpoints[0].address"}},
		{"TranslationRefusals", "PUT", "/kuma/meshes/default/meshexternalservices/x",
			`{"type":"MeshExternalService","name":"x","mesh":"default","spec":{"match":{"type":"Domain","port":443},"endpoints":[{"address":"a.com","port":443,"priority":2}]}}`,
			400, []string{"spec.match.type", "spec.endpoints[0].priority"}},
		{"FlatDataplaneRules", "PUT", "/kuma/meshes/default/dataplanes/dp",
			`{"type":"Dataplane","name":"dp","mesh":"default","networking":{"address":"0.0.0.0","inbound":[{"port":70000}]}}`,
			400, []string{"networking.address", "networking.inbound[0].port"}},
		{"SystemLabels", "PUT", "/kuma/meshes/default/meshservices/x",
			`{"type":"MeshService","name":"x","mesh":"default","labels":{"kuma.io/zone":"west"},"spec":{}}`,
			400, []string{`labels["kuma.io/zone"]`}},
		{"ZoneIngressRules", "PUT", "/kuma/zoneingresses/in",
			`{"type":"ZoneIngress","name":"in","networking":{"address":"0.0.0.0","port":70000,"advertisedAddress":"10.0.0.1"}}`,
			400, []string{"networking.address", "networking.port", "networking.advertisedPort"}},
		{"ZoneIngressOfAnotherZone", "PUT", "/kuma/zoneingresses/in",
			`{"type":"ZoneIngress","name":"in","zone":"west","networking":{"address":"10.0.0.1","port":10001}}`,
			400, []string{`labels["kuma.io/zone"]`}},
		{"WrongKind", "PUT", "/kuma/meshes/default/meshservices/x", `{"type":"Dataplane","name":"x"}`, 400, []string{"type"}},
		{"MissingMeshOnWrite", "PUT", "/kuma/meshes/nope/meshservices/x", `{"type":"MeshService","name":"x","mesh":"nope","spec":{}}`, 400, []string{"mesh"}},
		{"MissingMeshOnList", "GET", "/kuma/meshes/nope/meshservices", "", 404, nil},
		{"MissingResource", "GET", "/kuma/meshes/default/meshservices/nope", "", 404, nil},
		{"UnknownPath", "GET", "/kuma/mesh-insights", "", 404, nil},
		{"NotAllowed", "POST", "/kuma/meshes/default/meshservices/x", "{}", 405, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, tt.body)
			if r.code != tt.code {
				t.Fatalf("%s %s = %d, want %d: %s", tt.method, tt.path, r.code, tt.code, r.body)
			}
			var got kumaError
			r.json(t, &got)
			if got.Type != "/std-errors" || got.Status != tt.code || got.Title == "" || got.Details != got.Detail {
				t.Errorf("error body %s: want Kuma's type, status %d, a title and details", r.body, tt.code)
			}
			if d := cmp.Diff(tt.fields, fields(got)); d != "" {
				t.Errorf("invalid_parameters fields (-want +got):\n%s\nbody: %s", d, r.body)
			}
		})
	}
	for _, k := range []resource.Kind{resource.MeshService, resource.ZoneIngress} {
		if objs, _, err := e.st.List(context.Background(), k); err != nil || len(objs) != 0 {
			t.Errorf("rejected writes stored %v (%v)", objs, err)
		}
	}
}

// A resource holding what Kuma's shape cannot carry is shown with those
// fields listed, and a write through the adapter, which would remove them,
// is refused naming each; nothing is written.
func TestAdapter_RefusesAWriteThatWouldLoseNativeFields(t *testing.T) {
	e := newEnv(t)
	native := `{"type":"MeshService","name":"frontend","mesh":"default","spec":{"selector":{"dataplaneTags":{"kuma.io/service":"frontend"}},"ports":[{"port":80}],"export":{"mode":"None"}}}`
	if r := e.do(http.MethodPut, "/meshes/default/meshservices/frontend", native); r.code != http.StatusCreated {
		t.Fatalf("native PUT = %d %s", r.code, r.body)
	}
	r := e.do(http.MethodGet, "/kuma/meshes/default/meshservices/frontend", "")
	var view struct {
		Meshnames Extra `json:"meshnames"`
	}
	r.json(t, &view)
	var omitted []string
	for _, o := range view.Meshnames.Omitted {
		omitted = append(omitted, o.Field)
	}
	want := []string{"spec.selector.dataplaneTags", "spec.export"}
	if d := cmp.Diff(want, omitted); d != "" || view.Meshnames.Native != "/meshes/default/meshservices/frontend" {
		t.Errorf("meshnames %+v; omitted (-want +got):\n%s", view.Meshnames, d)
	}
	// kumactl drops what it does not know and sends the rest back.
	r = e.do(http.MethodPut, "/kuma/meshes/default/meshservices/frontend", string(r.body))
	var got kumaError
	r.json(t, &got)
	if r.code != http.StatusBadRequest || !slices.Equal(fields(got), want) {
		t.Errorf("PUT back = %d %s; want 400 naming %v", r.code, r.body, want)
	}
	if o := e.stored(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "frontend"}); o.Version != 1 {
		t.Errorf("refused write changed the service: version %d", o.Version)
	}
}

// A PUT answers Kuma's {"warnings": [...]} with the native warnings, at
// their Kuma paths.
func TestAdapter_PutWarnings(t *testing.T) {
	e := newEnv(t)
	r := e.do(http.MethodPut, "/kuma/meshes/default/meshexternalservices/httpbin", kumaDocs[4].doc)
	var put PutResult
	r.json(t, &put)
	if r.code != http.StatusCreated || len(put.Warnings) != 1 || !strings.HasPrefix(put.Warnings[0], "spec.tls.verification.subjectAltNames: not checked") {
		t.Errorf("PUT = %d %s; want one warning about spec.tls.verification.subjectAltNames", r.code, r.body)
	}
}

func TestAdapter_IndexHostnamesZones(t *testing.T) {
	e := newEnv(t)
	r := e.do(http.MethodGet, "/kuma", "")
	var idx Index
	r.json(t, &idx)
	if r.code != http.StatusOK || idx.Product != "meshnames" || idx.Version != "1.2.3" || idx.KumaAPI != APIVersion || idx.Hostname == "" {
		t.Errorf("GET /kuma = %d %s", r.code, r.body)
	}
	for _, d := range []int{3, 6} { // the service and the generator
		if r := e.do(http.MethodPut, kumaDocs[d].path, kumaDocs[d].doc); r.code != http.StatusCreated {
			t.Fatalf("PUT = %d %s", r.code, r.body)
		}
	}
	r = e.do(http.MethodGet, "/kuma/meshes/default/meshservices/redis/_hostnames", "")
	var hn Hostnames
	r.json(t, &hn)
	want := Hostnames{Total: 1, Items: []HostnameItem{{Hostname: "redis.storage.mesh", Zones: []ZoneName{{Name: "east"}}}}}
	if d := cmp.Diff(want, hn); d != "" || r.code != http.StatusOK {
		t.Errorf("_hostnames = %d (-want +got):\n%s", r.code, d)
	}
	if r := e.do(http.MethodGet, "/kuma/meshes/default/meshservices/nope/_hostnames", ""); r.code != http.StatusNotFound {
		t.Errorf("_hostnames of a missing service = %d", r.code)
	}

	if r := e.do(http.MethodPut, kumaDocs[1].path, kumaDocs[1].doc); r.code != http.StatusCreated {
		t.Fatalf("PUT zone = %d %s", r.code, r.body)
	}
	r = e.do(http.MethodGet, "/kuma/zones/_overview", "")
	var page struct {
		Total int            `json:"total"`
		Items []ZoneOverview `json:"items"`
	}
	r.json(t, &page)
	if r.code != http.StatusOK || page.Total != 1 || page.Items[0].Name != "west" || page.Items[0].Type != "ZoneOverview" ||
		page.Items[0].Zone.Enabled == nil || *page.Items[0].Zone.Enabled {
		t.Errorf("zones/_overview = %d %s", r.code, r.body)
	}
}

// BenchmarkAdapter compares a write and a read through /kuma with the same
// request on the native API, on the embedded store: the adapter's cost is
// the translation and, for a PUT, the read of the stored resource first.
// Both PUTs answer without the stored object (the native one is asked for
// return=minimal, which the adapter always asks).
func BenchmarkAdapter(b *testing.B) {
	var created int
	e := newEnv(b)
	native := `{"type":"MeshService","mesh":"default","name":"%s","spec":{"selector":{"dataplaneLabels":{"matchLabels":{"app":"redis"}}},"ports":[{"name":"main","port":6379}]}}`
	for _, bc := range []struct{ name, prefix string }{{"native", ""}, {"kuma", "/kuma"}} {
		b.Run("put-create/"+bc.name, func(b *testing.B) {
			for b.Loop() {
				created++
				name := fmt.Sprintf("svc-%d", created)
				if r := e.do(http.MethodPut, bc.prefix+"/meshes/default/meshservices/"+name, fmt.Sprintf(native, name), "Prefer", "return=minimal"); r.code != http.StatusCreated {
					b.Fatalf("PUT = %d %s", r.code, r.body)
				}
			}
		})
		b.Run("list-100/"+bc.name, func(b *testing.B) {
			for b.Loop() {
				if r := e.do(http.MethodGet, bc.prefix+"/meshes/default/meshservices?size=100", ""); r.code != http.StatusOK {
					b.Fatalf("GET = %d", r.code)
				}
			}
		})
	}
}
