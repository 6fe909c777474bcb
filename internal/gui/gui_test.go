package gui_test

import (
	"encoding/json"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/gui"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/server/servertest"
)

// The documents of the README's walkthrough: a MeshService, two external
// services, and two generators that give a MeshService and an external
// service the same name, which the MeshService wins.
const walkthrough = `
type: MeshService
name: redis
mesh: default
labels:
  team: storage
spec:
  ports:
  - port: 6379
    targetPort: 6379
    appProtocol: tcp
---
type: MeshExternalService
name: httpbin
mesh: default
spec:
  match:
  - type: Domain
    value: httpbin.org
    port: 443
    protocol: tls
---
type: HostnameGenerator
name: by-team
spec:
  selector:
    meshService:
      matchLabels:
        team: storage
  template: "{{ .Name }}.storage.mesh.local"
---
type: MeshExternalService
name: redis-cloud
mesh: default
labels:
  team: storage
spec:
  match:
  - type: InternalVIP
    value: cloud.redis.ext
    port: 6379
    protocol: tcp
---
type: HostnameGenerator
name: external-by-team
spec:
  selector:
    meshExternalService:
      matchLabels:
        team: storage
  template: "redis.storage.mesh.local"
`

type env struct {
	t   *testing.T
	api string
	// xds is the ADS address, once it listens.
	xds chan string
}

// newEnv starts a whole control plane in-process (store, cache,
// controllers, DNS, xDS, API and GUI) and applies docs.
func newEnv(t *testing.T, docs string) *env {
	t.Helper()
	cfg := config.Default()
	cfg.DNS.Addr = "127.0.0.1:0"
	cfg.XDS.Addr = "127.0.0.1:0"
	e := &env{t: t, xds: make(chan string, 1)}
	e.api = servertest.Start(t, cfg, servertest.Options{XDSListening: func(a string) { e.xds <- a }})
	e.waitReady()
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) != "" {
			e.put(doc)
		}
	}
	return e
}

func (e *env) waitReady() {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if code, _ := e.get("/readyz", ""); code == http.StatusOK {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatal("not ready within 30s")
}

// put writes one YAML document at its REST path.
func (e *env) put(doc string) {
	e.t.Helper()
	var meta struct {
		Type, Name, Mesh string
	}
	for _, line := range strings.Split(doc, "\n") {
		if v, ok := strings.CutPrefix(line, "type: "); ok {
			meta.Type = v
		}
		if v, ok := strings.CutPrefix(line, "name: "); ok && meta.Name == "" {
			meta.Name = v
		}
		if v, ok := strings.CutPrefix(line, "mesh: "); ok {
			meta.Mesh = v
		}
	}
	d, ok := resource.Lookup(resource.Kind(meta.Type))
	if !ok {
		e.t.Fatalf("unknown type %q", meta.Type)
	}
	path := "/" + d.Plural + "/" + meta.Name
	if d.MeshScoped {
		path = "/meshes/" + meta.Mesh + "/" + d.Plural + "/" + meta.Name
	}
	req, _ := http.NewRequest(http.MethodPut, e.api+path, strings.NewReader(doc))
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("PUT %s: %d %s", path, resp.StatusCode, b)
	}
}

func (e *env) delete(path string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, e.api+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("DELETE %s: %d", path, resp.StatusCode)
	}
}

// get returns the status and body of a GET with the Accept header given.
func (e *env) get(path, accept string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.api+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultTransport.RoundTrip(req) // no redirects followed
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) getJSON(path string, v any) {
	e.t.Helper()
	code, body := e.get(path, "application/json")
	if code != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
}

// eventually polls the GUI page at path until it contains every one of
// want, or fails after a deadline (the controllers write status
// asynchronously).
func (e *env) eventually(path string, want ...string) string {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var body string
	for {
		var code int
		code, body = e.get(path, "text/html")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if code == http.StatusOK && missing == "" {
			return body
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("GET %s: %d, still without %q after 15s:\n%s", path, code, missing, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// esc is how html/template writes text.
func esc(s string) string { return template.HTMLEscapeString(s) }

// settled waits until the controllers have named every service of the
// walkthrough (redis holds both its names, redis-cloud lost one and has a
// VIP for its InternalVIP match), and returns the VIPs of redis and
// redis-cloud.
func (e *env) settled() (redisVIP, cloudVIP string) {
	e.t.Helper()
	vip := func(path string) string {
		var o struct {
			Status struct {
				Addresses []struct{ Hostname, Status string }
				VIPs      []struct{ IP string }
			}
		}
		e.getJSON(path, &o)
		if len(o.Status.VIPs) == 0 || len(o.Status.Addresses) < 2 {
			return ""
		}
		return o.Status.VIPs[0].IP
	}
	deadline := time.Now().Add(15 * time.Second)
	for redisVIP == "" || cloudVIP == "" {
		if time.Now().After(deadline) {
			e.t.Fatal("the walkthrough was not named within 15s")
		}
		time.Sleep(20 * time.Millisecond)
		redisVIP, cloudVIP = vip("/meshes/default/meshservices/redis"), vip("/meshes/default/meshexternalservices/redis-cloud")
	}
	e.eventually("/gui/services/meshexternalservices/default/redis-cloud", cloudVIP, "NotAvailable")
	e.eventually("/gui/services/meshservices/default/redis", redisVIP, "redis.storage.mesh.local")
	// The DNS table, which searches use, is built a moment after.
	e.eventually("/gui/dns", ">cloud.redis.ext.</td>", ">redis.storage.mesh.local.</td>", ">"+cloudVIP+"</a>", ">"+redisVIP+"</a>")
	return redisVIP, cloudVIP
}

func TestRoutes(t *testing.T) {
	e := newEnv(t, walkthrough)
	redisVIP, cloudVIP := e.settled()
	tests := []struct {
		path string
		code int
		want []string
	}{
		{"/gui/", 200, []string{"<h1>Overview</h1>", "Resources per mesh", ">default</th>", "Names not available", "241.0.0.0/8", "Leader", "Recent changes", "MeshService default/redis"}},
		{"/gui/services", 200, []string{"Services 1-3 of 3", ">redis</a>", ">httpbin</a>", ">redis-cloud</a>", redisVIP, `<label for="q">Search</label>`}},
		{"/gui/services?kind=meshexternalservices", 200, []string{"Services 1-2 of 2", ">httpbin</a>"}},
		{"/gui/services?q=redis.storage", 200, []string{"Services 1-2 of 2", ">redis</a>", ">redis-cloud</a>"}},
		{"/gui/services?q=" + redisVIP, 200, []string{"Services 1-1 of 1", ">redis</a>"}},
		{"/gui/services?q=team%3Dstorage+cloud", 200, []string{"Services 1-1 of 1", ">redis-cloud</a>"}},
		{"/gui/services?q=nothing-like-this", 200, []string{"No services match."}},
		{"/gui/services?mesh=other", 200, []string{"No services match."}},
		{"/gui/services/meshservices/default/redis", 200, []string{"<h1>MeshService default/redis</h1>", "redis.svc.mesh.local", redisVIP, "Every generator and this service", "DNS names", "redis.svc.mesh.local.", "6379"}},
		{"/gui/services/meshexternalservices/default/redis-cloud", 200, []string{"cloud.redis.ext", cloudVIP, `class="holder" href="/gui/services/meshservices/default/redis"`}},
		{"/gui/generators", 200, []string{`id="gen-by-team"`, esc("{{ .Name }}.storage.mesh.local"), "external-by-team", "MeshExternalService default/redis-cloud"}},
		{"/gui/dns", 200, []string{"Names answered in mesh default", "redis.svc.mesh.local.", "cloud.redis.ext.", "Names not answered", "redis.storage.mesh.local."}},
		{"/gui/dns?mesh=default&q=cloud", 200, []string{"cloud.redis.ext."}},
		{"/gui/search", 200, []string{`<label for="who">IP or hostname</label>`}},
		{"/gui/search?q=" + redisVIP, 200, []string{"MeshService default/redis", "In the MeshService pool 241.0.0.0/8: allocated."}},
		{"/gui/search?q=" + cloudVIP, 200, []string{"MeshExternalService default/redis-cloud", "In the MeshExternalService pool 242.0.0.0/8: allocated."}},
		{"/gui/search?q=REDIS.storage.mesh.local.", 200, []string{"<h2 id=\"h-name\">redis.storage.mesh.local</h2>", "MeshService default/redis", "MeshExternalService default/redis-cloud", "What the DNS server answers"}},
		{"/gui/search?q=241.9.9.9", 200, []string{"No service has 241.9.9.9 in status.vips.", "free."}},
		{"/gui/search?q=red", 200, []string{"Services whose name, hostnames, DNS names or VIPs contain", "MeshService default/redis", "MeshExternalService default/redis-cloud"}},
		{"/gui/search?q=httpbin.extsvc.mesh.local", 200, []string{"MeshExternalService default/httpbin", "this service"}}, // held without a VIP
		{"/gui/services?q=httpbin.extsvc", 200, []string{"Services 1-1 of 1", ">httpbin</a>"}},
		{"/gui/zones", 200, []string{"This is a standalone control plane: it has no global and keeps no zone insights.", `<a href="/gui/zoneingresses">Zone ingresses</a>: 0`}},
		{"/gui/zoneingresses", 200, []string{"There are no ZoneIngresses."}},
		{"/gui/dataplanes", 200, []string{"No Dataplanes match.", `<label for="dp-q">Name</label>`}},
		{"/gui", 301, nil},
		{"/gui/static/htmx.min.js", 200, []string{"htmx"}},
		{"/gui/static/style.css", 200, []string{"--fg"}},
		{"/gui/static/gui.js", 200, []string{"meshnames-token"}},
		// Bad input: a page that says what is wrong, with its status.
		{"/gui/services?kind=dataplanes", 400, []string{"kind: must be one of meshservices, meshexternalservices, meshmultizoneservices"}},
		{"/gui/services?page=0", 400, []string{"page: must be a page number from 1"}},
		{"/gui/dns?page=x", 400, []string{"page: must be a page number from 1"}},
		{"/gui/dns?mesh=nope", 404, []string{"mesh: there is no mesh &#34;nope&#34;."}},
		{"/gui/services/meshservices/default/nope", 404, []string{"MeshService default/nope does not exist."}},
		{"/gui/services/dataplanes/default/x", 404, []string{"There is no service kind"}},
		{"/gui/dataplanes?page=0", 400, []string{"page: must be a page number from 1"}},
		{"/gui/dataplanes/default/nope", 404, []string{"Dataplane default/nope does not exist."}},
		{"/gui/nope", 404, []string{"There is no page at /gui/nope."}},
		{"/gui/_wait?rev=x", 400, []string{"rev: must be a revision"}},
	}
	for _, tt := range tests {
		t.Run(strings.NewReplacer("/", "_", "?", "_").Replace(tt.path), func(t *testing.T) {
			code, body := e.get(tt.path, "text/html")
			if code != tt.code {
				t.Fatalf("GET %s: %d, want %d\n%s", tt.path, code, tt.code, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s: missing %q in\n%s", tt.path, w, body)
				}
			}
		})
	}
}

func TestReadOnly(t *testing.T) {
	e := newEnv(t, "")
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, e.api+"/gui/services", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /gui/services: %d, Allow %q; want 405, GET, HEAD", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}

func TestIndexRedirectsBrowsers(t *testing.T) {
	e := newEnv(t, "")
	tests := []struct {
		accept   string
		code     int
		location string
	}{
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", http.StatusSeeOther, "/gui/"},
		{"*/*", http.StatusOK, ""},
		{"application/json", http.StatusOK, ""},
		{"", http.StatusOK, ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodGet, e.api+"/", nil)
		if tt.accept != "" {
			req.Header.Set("Accept", tt.accept)
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		var info api.Info
		err = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		if resp.StatusCode != tt.code || resp.Header.Get("Location") != tt.location {
			t.Errorf("Accept %q: %d to %q, want %d to %q", tt.accept, resp.StatusCode, resp.Header.Get("Location"), tt.code, tt.location)
		}
		if tt.code == http.StatusOK && (err != nil || info.Product != "meshnames") {
			t.Errorf("Accept %q: index document %+v, %v", tt.accept, info, err)
		}
	}
}

// TestService_ShowsTheHostnamesInspection checks that the service page
// shows what GET .../_hostnames answers, item for item.
func TestService_ShowsTheHostnamesInspection(t *testing.T) {
	e := newEnv(t, walkthrough)
	e.settled()
	for _, svc := range []struct{ kind, name string }{{"meshservices", "redis"}, {"meshexternalservices", "redis-cloud"}, {"meshexternalservices", "httpbin"}} {
		var rep api.HostnamesReport
		e.getJSON("/meshes/default/"+svc.kind+"/"+svc.name+"/_hostnames", &rep)
		_, page := e.get("/gui/services/"+svc.kind+"/default/"+svc.name, "text/html")
		table := section(t, page, `<table id="generators">`)
		if len(rep.Items) == 0 {
			t.Fatalf("%s: empty inspection", svc)
		}
		rows := strings.Split(table, "<tr>")[2:] // the header row, then one per item
		if len(rows) != len(rep.Items) {
			t.Fatalf("%s: %d rows for %d items:\n%s", svc, len(rows), len(rep.Items), table)
		}
		for i, it := range rep.Items {
			for _, w := range []string{">" + esc(it.Generator) + "</a>", esc(it.Hostname), esc(it.Reason), esc(it.Status)} {
				if !strings.Contains(rows[i], w) {
					t.Errorf("%s: row %d lacks %q of %+v:\n%s", svc, i, w, it, rows[i])
				}
			}
			if sel := map[bool]string{true: "<td>yes</td>", false: "<td>no</td>"}[it.Selects]; !strings.Contains(rows[i], sel) {
				t.Errorf("%s: row %d does not say selects=%v:\n%s", svc, i, it.Selects, rows[i])
			}
		}
	}
}

// TestDNS_ShowsTheListing checks that the DNS page lists what GET
// /meshes/default/_dns answers.
func TestDNS_ShowsTheListing(t *testing.T) {
	e := newEnv(t, walkthrough)
	e.settled()
	e.eventually("/gui/dns", "cloud.redis.ext.")
	var l api.DNSListing
	e.getJSON("/meshes/default/_dns", &l)
	_, page := e.get("/gui/dns", "text/html")
	answered := section(t, page, `<table id="dns-names">`)
	if n := strings.Count(answered, "<tr>") - 1; n != len(l.Names) {
		t.Errorf("%d names on the page, the API lists %d", n, len(l.Names))
	}
	for _, n := range l.Names {
		row := ">" + esc(n.Name) + "</td>"
		if !strings.Contains(answered, row) {
			t.Errorf("answered name %q missing", n.Name)
		}
		for _, ip := range n.A {
			if !strings.Contains(answered, ">"+ip+"</a>") {
				t.Errorf("address %s of %s missing", ip, n.Name)
			}
		}
	}
	notAnswered := section(t, page, `<table id="dns-not-answered">`)
	for _, n := range l.NotAnswered {
		if !strings.Contains(notAnswered, esc(n.Name)) || !strings.Contains(notAnswered, esc(n.Reason)) {
			t.Errorf("name not answered %+v missing", n)
		}
	}
}

// TestServices_ShowStatusAsTheAPI checks each row of the services list
// against the resource the API returns.
func TestServices_ShowStatusAsTheAPI(t *testing.T) {
	e := newEnv(t, walkthrough)
	e.settled()
	var list struct {
		Items []struct {
			Name   string
			Status struct {
				Addresses []struct{ Hostname, Status, Reason string }
				VIPs      []struct{ IP string }
			}
		}
	}
	e.getJSON("/meshes/default/meshexternalservices", &list)
	_, page := e.get("/gui/services?kind=meshexternalservices", "text/html")
	table := section(t, page, `<table class="services">`)
	rows := strings.Split(table, "<tr>")[2:]
	if len(rows) != len(list.Items) {
		t.Fatalf("%d rows, the API lists %d", len(rows), len(list.Items))
	}
	for i, it := range list.Items {
		if !strings.Contains(rows[i], ">"+it.Name+"</a>") {
			t.Errorf("row %d is not %s:\n%s", i, it.Name, rows[i])
		}
		for _, a := range it.Status.Addresses {
			for _, w := range []string{esc(a.Hostname), esc(a.Status), esc(a.Reason)} {
				if !strings.Contains(rows[i], w) {
					t.Errorf("row %s lacks %q", it.Name, w)
				}
			}
		}
		for _, v := range it.Status.VIPs {
			if !strings.Contains(rows[i], ">"+v.IP+"</a>") {
				t.Errorf("row %s lacks VIP %s", it.Name, v.IP)
			}
		}
	}
}

// TestCollision_TheNextClaimantGetsTheName follows a collision: the
// loser's page names the winner; once the winner is gone the loser holds
// the name, and the search page says so.
func TestCollision_TheNextClaimantGetsTheName(t *testing.T) {
	e := newEnv(t, walkthrough)
	e.settled()
	page := e.eventually("/gui/search?q=redis.storage.mesh.local", "MeshExternalService default/redis-cloud")
	claims := section(t, page, `<table id="claims">`)
	if i, j := strings.Index(claims, "MeshService default/redis</a>"), strings.Index(claims, "MeshExternalService default/redis-cloud</a>"); i < 0 || j < i {
		t.Fatalf("the holder is not listed first:\n%s", claims)
	}
	e.delete("/meshes/default/meshservices/redis")
	page = e.eventually("/gui/search?q=redis.storage.mesh.local", "✓ Available")
	claims = section(t, page, `<table id="claims">`)
	if strings.Contains(claims, "NotAvailable") || !strings.Contains(claims, "MeshExternalService default/redis-cloud") {
		t.Fatalf("redis-cloud does not hold the name after redis went:\n%s", claims)
	}
}

// TestWait_AnswersWhenTheRevisionPasses checks the live updates' long
// poll: it answers once a change is in the cache, with a later revision.
func TestWait_AnswersWhenTheRevisionPasses(t *testing.T) {
	e := newEnv(t, "")
	_, page := e.get("/gui/services", "text/html")
	rev := attr(t, page, "data-revision")
	done := make(chan string, 1)
	go func() {
		_, body := e.get("/gui/_wait?rev="+rev, "")
		done <- body
	}()
	// Without a change the poll answers after 25 s with the same
	// revision, which fails below; the write makes it answer at once.
	e.put("type: Mesh\nname: second\n")
	select {
	case body := <-done:
		var got struct{ Revision int64 }
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.ParseInt(rev, 10, 64)
		if got.Revision <= want {
			t.Fatalf("revision %d, want more than %d", got.Revision, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poll did not answer within 10s of a change")
	}
	page = e.eventually("/gui/services", `<option value="second">second</option>`)
	if attr(t, page, "data-revision") == rev {
		t.Error("the page's revision did not move")
	}
}

// TestTokenPrompt checks the page the API's authentication answers a
// browser with: a 401 that asks for the token.
func TestTokenPrompt(t *testing.T) {
	rec := httptest.NewRecorder()
	gui.TokenPrompt(rec, httptest.NewRequest(http.MethodGet, "/gui/", nil), http.StatusUnauthorized, "a token is required: the request has none")
	body := rec.Body.String()
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Header().Get("Content-Type"), "text/html") {
		t.Errorf("%d, %q; want 401 and a page", rec.Code, rec.Header().Get("Content-Type"))
	}
	for _, w := range []string{`id="prompt-open"`, "a token is required: the request has none", `<label for="token-input">Token</label>`} {
		if !strings.Contains(body, w) {
			t.Errorf("missing %q in\n%s", w, body)
		}
	}
}

// section returns the HTML from start to the end of its table.
func section(t *testing.T, page, start string) string {
	t.Helper()
	i := strings.Index(page, start)
	if i < 0 {
		t.Fatalf("no %s in the page:\n%s", start, page)
	}
	j := strings.Index(page[i:], "</table>")
	if j < 0 {
		t.Fatalf("%s is not closed", start)
	}
	return page[i : i+j]
}

func attr(t *testing.T, page, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, name+`="`)
	if !ok {
		t.Fatalf("no %s in the page", name)
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// TestMultiZoneService_ShowsMatchedServices checks the page of a
// MeshMultiZoneService against its status as the API returns it.
func TestMultiZoneService_ShowsMatchedServices(t *testing.T) {
	e := newEnv(t, walkthrough+`
---
type: MeshMultiZoneService
name: redis-everywhere
mesh: default
spec:
  selector:
    meshService:
      matchLabels:
        team: storage
`)
	page := e.eventually("/gui/services/meshmultizoneservices/default/redis-everywhere", `<table id="matched">`)
	var o struct {
		Status struct {
			MeshServices []struct{ Name, Zone, Mesh string }
			Zones        []struct{ Name string }
		}
	}
	e.getJSON("/meshes/default/meshmultizoneservices/redis-everywhere", &o)
	if len(o.Status.MeshServices) == 0 {
		t.Fatalf("the API shows no matched service: %+v", o)
	}
	matched := section(t, page, `<table id="matched">`)
	for _, ms := range o.Status.MeshServices {
		for _, w := range []string{">" + ms.Name + "</a>", "<td>" + ms.Zone + "</td>"} {
			if !strings.Contains(matched, w) {
				t.Errorf("matched service %+v: %q missing in\n%s", ms, w, matched)
			}
		}
	}
	if !strings.Contains(matched, "q=kuma.io%2Fdisplay-name%3Dredis") {
		t.Errorf("the matched service does not link to a search for it:\n%s", matched)
	}
}
