package apiserver

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/auth"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/kuma"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/token"
)

// secureEnv is the API with security on, over a real embedded store and
// cache, holding the meshes default and m1.
type secureEnv struct {
	*env
	keys   *token.Keys
	tokens map[token.Role]string // one token of each role, not limited to meshes
	cache  *cache.Cache
}

type secureOptions struct {
	mode          string
	loopbackAdmin bool
	rate          float64
	burst         int
	syncPin       func() (string, error)
	kuma          bool // serve the Kuma adapter in front, as the server does
	limits        Limits
	// gui and guiPrompt are Options.GUI and Options.GUIPrompt.
	gui       http.Handler
	guiPrompt func(w http.ResponseWriter, r *http.Request, status int, reason string)
}

func newSecureEnv(t *testing.T, o secureOptions) *secureEnv {
	t.Helper()
	if o.mode == "" {
		o.mode = "standalone"
	}
	st := storeWithDefaultMesh(t)
	ctx := context.Background()
	if _, err := store.Create(ctx, st, &resource.Object{Kind: resource.Mesh, Name: "m1", Spec: &resource.MeshSpec{}}); err != nil {
		t.Fatal(err)
	}
	keys, err := token.LoadKeys(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := cache.New(st, log, nil)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.Run(cctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitSynced(t, c)
	reg := prometheus.NewRegistry()
	guard := auth.NewGuard(auth.Options{Keys: keys, LoopbackAdmin: o.loopbackAdmin, Rate: o.rate, Burst: o.burst, Log: log, Registerer: reg})
	srv := New(Options{Cache: c, Admission: admission.New(admission.Options{Store: AuditingStore(st), Cache: c, Mode: o.mode, Zone: "east"}),
		Store: st, Log: log, Registry: reg, Version: "test", Auth: guard, Keys: keys, SyncPin: o.syncPin,
		GUI: o.gui, GUIPrompt: o.guiPrompt, Limits: o.limits})
	h := srv.Handler()
	if o.kuma {
		h = kuma.Mount(h, srv.opts.Limits.MaxBodyBytes)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	e := &secureEnv{env: &env{t: t, srv: hs, st: st}, keys: keys, tokens: map[token.Role]string{}, cache: c}
	for _, r := range token.Roles() {
		e.tokens[r] = e.sign(token.Claims{Subject: "user-" + string(r), Role: r})
	}
	return e
}

// sign signs c valid for an hour from now, with a zone for zone tokens.
func (e *secureEnv) sign(c token.Claims) string {
	e.t.Helper()
	if c.Role == token.RoleZone && c.Zone == "" {
		c.Zone = "east"
	}
	if c.Role == token.RoleDataplane && len(c.Meshes) == 0 {
		c.Meshes = []string{"m1"}
	}
	if c.ExpiresAt.IsZero() {
		c.ExpiresAt = time.Now().Add(time.Hour)
	}
	raw, err := e.keys.Sign(c)
	if err != nil {
		e.t.Fatal(err)
	}
	return raw
}

// as sends a request with the token raw ("" sends none).
func (e *secureEnv) as(raw, method, path, body string) reply {
	e.t.Helper()
	var h []string
	if raw != "" {
		h = []string{"Authorization", "Bearer " + raw}
	}
	ct := ""
	if body != "" {
		ct = "application/yaml"
	}
	return e.do(method, path, ct, body, h...)
}

// revision is the store's revision: it moves with every resource write.
func (e *secureEnv) revision() int64 {
	e.t.Helper()
	_, rev, err := e.st.List(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

func (e *secureEnv) auditEntries(q string) []api.AuditEntry {
	e.t.Helper()
	r := e.as(e.tokens[token.RoleAdmin], "GET", "/audit"+q, "")
	if r.code != 200 {
		e.t.Fatalf("GET /audit%s = %d %s", q, r.code, r.body)
	}
	var page api.AuditPage
	if err := json.Unmarshal(r.body, &page); err != nil {
		e.t.Fatal(err)
	}
	return page.Items
}

// matrixRow is one row of a table of docs/security.md.
type matrixRow struct {
	line  int
	cells []string
}

// readTable returns the rows of the Markdown table of docs/security.md
// whose header starts with header.
func readTable(t *testing.T, header string) []matrixRow {
	t.Helper()
	f, err := os.Open("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []matrixRow
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, header):
			in = true
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			var cells []string
			for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows = append(rows, matrixRow{line: n, cells: cells})
		case in:
			return rows
		}
	}
	if len(rows) == 0 {
		t.Fatalf("docs/security.md has no table starting %q", header)
	}
	return rows
}

// concrete turns a documented path into one to request: a mesh that exists
// for paths in a mesh, names that do not exist (so that no DELETE removes
// anything the other requests need).
func concrete(path string) string {
	if path == "any other path" {
		return "/no/such/path"
	}
	path = strings.Trim(path, "`")
	if strings.HasSuffix(path, "/meshes/{mesh}") {
		return strings.Replace(path, "{mesh}", "absent", 1)
	}
	return strings.NewReplacer("{mesh}", "m1", "{name}", "absent", "{id}", "absent").Replace(path)
}

// allowedStatus reports whether status means the policy let the request
// through.
func allowedStatus(status int) bool {
	return status != http.StatusUnauthorized && status != http.StatusForbidden && status != http.StatusTooManyRequests
}

// TestRoleMatrix checks every cell of the role x endpoint x verb table of
// docs/security.md against the real handler.
func TestRoleMatrix(t *testing.T) {
	e := newSecureEnv(t, secureOptions{})
	rows := readTable(t, "| Endpoint | Methods |")
	columns := []token.Role{"", token.RoleAdmin, token.RoleOperator, token.RoleServiceOwner, token.RoleReadOnly, token.RoleZone}
	for _, row := range rows {
		if len(row.cells) != 2+len(columns) {
			t.Fatalf("docs/security.md:%d: %d cells, want %d", row.line, len(row.cells), 2+len(columns))
		}
		path := concrete(row.cells[0])
		for _, method := range strings.Split(row.cells[1], ", ") {
			for i, role := range columns {
				want := row.cells[2+i]
				t.Run(fmt.Sprintf("%s_%s_%s", method, strings.ReplaceAll(row.cells[0], "/", "_"), cmpRole(role)), func(t *testing.T) {
					raw := ""
					if role != "" {
						raw = e.tokens[role]
					}
					before := e.revision()
					r := e.as(raw, method, path, "")
					switch want {
					case "yes":
						if !allowedStatus(r.code) {
							t.Errorf("docs/security.md:%d: %s %s as %s = %d %s; the table says yes", row.line, method, path, cmpRole(role), r.code, r.body)
						}
					case "no":
						wantCode := http.StatusForbidden
						if role == "" {
							wantCode = http.StatusUnauthorized
						}
						if r.code != wantCode {
							t.Errorf("docs/security.md:%d: %s %s as %s = %d %s; the table says no (%d)", row.line, method, path, cmpRole(role), r.code, r.body, wantCode)
						}
						if r.error().Detail == "" {
							t.Errorf("refusal without a reason: %s", r.body)
						}
						if after := e.revision(); after != before {
							t.Errorf("a refused request changed the store: revision %d -> %d", before, after)
						}
					default:
						t.Fatalf("docs/security.md:%d: cell %q is neither yes nor no", row.line, want)
					}
				})
			}
		}
	}
}

func cmpRole(r token.Role) string {
	if r == "" {
		return "no-token"
	}
	return string(r)
}

// TestRoleMatrix_CoversEveryRoute checks that the table names every route
// and method the API serves, so a new endpoint cannot be left out of it.
func TestRoleMatrix_CoversEveryRoute(t *testing.T) {
	documented := map[string]bool{}
	for _, row := range readTable(t, "| Endpoint | Methods |") {
		for _, m := range strings.Split(row.cells[1], ", ") {
			documented[m+" "+strings.Trim(row.cells[0], "`")] = true
		}
	}
	want := []string{"GET /", "GET /healthz", "GET /readyz", "GET /metrics", "GET /_leader", "POST /_apply", "GET /meshes/{mesh}/_dns",
		"GET /meshes/{mesh}/_servicetags", "GET /meshes/{mesh}/dataplanes/{name}/_xds", "GET /zoneingresses/{name}/_xds", "GET /tokens", "POST /tokens", "POST /tokens/zone", "POST /tokens/_rotate-key",
		"GET /tokens/{id}", "DELETE /tokens/{id}", "GET /audit", "GET /history", "GET /_backup"}
	for _, d := range resource.Descriptors() {
		base := "/" + d.Plural
		item := base + "/{name}"
		if d.MeshScoped {
			base = "/meshes/{mesh}/" + d.Plural
			item = base + "/{name}"
		} else if d.Kind == resource.Mesh {
			item = "/meshes/{mesh}"
		}
		want = append(want, "GET "+base, "GET "+item, "PUT "+item, "DELETE "+item)
		if d.MeshScoped {
			want = append(want, "GET /"+d.Plural) // the list across every mesh
		}
		if d.ServiceKind {
			want = append(want, "GET "+item+"/_hostnames")
		}
	}
	for _, w := range want {
		if !documented[w] {
			t.Errorf("docs/security.md's role table does not name %s", w)
		}
	}
}

// TestMeshLimitedTokens checks the table of tokens limited to meshes.
func TestMeshLimitedTokens(t *testing.T) {
	e := newSecureEnv(t, secureOptions{})
	if _, err := store.Create(context.Background(), e.st, &resource.Object{Kind: resource.Mesh, Name: "m2", Spec: &resource.MeshSpec{}}); err != nil {
		t.Fatal(err)
	}
	columns := []token.Role{token.RoleServiceOwner, token.RoleOperator, token.RoleReadOnly}
	for _, row := range readTable(t, "| Request | service-owner of m1 |") {
		method, path, _ := strings.Cut(row.cells[0], " ")
		path = strings.NewReplacer("`", "", "{name}", "absent").Replace(path)
		for i, role := range columns {
			raw := e.sign(token.Claims{Subject: "limited", Role: role, Meshes: []string{"m1"}})
			r := e.as(raw, method, path, "")
			switch want := row.cells[1+i]; {
			case want == "yes" && !allowedStatus(r.code):
				t.Errorf("docs/security.md:%d: %s %s as %s of m1 = %d %s; the table says yes", row.line, method, path, role, r.code, r.body)
			case want == "no" && r.code != http.StatusForbidden:
				t.Errorf("docs/security.md:%d: %s %s as %s of m1 = %d %s; the table says no (403)", row.line, method, path, role, r.code, r.body)
			}
		}
	}
}

const serviceDoc = `type: MeshService
name: redis
mesh: m1
spec:
  ports:
  - port: 6379
    targetPort: 6379
    appProtocol: tcp
`

const generatorDoc = `type: HostnameGenerator
name: takeover
spec:
  selector:
    meshService:
      matchLabels:
        kuma.io/origin: zone
  template: "{{ .DisplayName }}.svc.mesh.local"
`

// TestAttacks_OnTheAPI is the attack table of the security issue, played
// against the real handler: every refusal is 401 or 403 with a reason, and
// changes nothing.
func TestAttacks_OnTheAPI(t *testing.T) {
	e := newSecureEnv(t, secureOptions{loopbackAdmin: true}) // tokens win over loopback
	now := time.Now()
	other := newSecureEnv(t, secureOptions{}) // another control plane's key
	expired := e.sign(token.Claims{Subject: "old", Role: token.RoleAdmin, IssuedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)})
	future := e.sign(token.Claims{Subject: "early", Role: token.RoleAdmin, NotBefore: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)})
	revoked, c, err := e.keys.Issue(context.Background(), token.Claims{Subject: "gone", Role: token.RoleAdmin, ExpiresAt: now.Add(time.Hour)}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.keys.Revoke(context.Background(), c.ID, "test", now); err != nil {
		t.Fatal(err)
	}
	admin := e.tokens[token.RoleAdmin]
	parts := strings.Split(admin, ".")
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	ownerOfM1 := e.sign(token.Claims{Subject: "owner", Role: token.RoleServiceOwner, Meshes: []string{"m1"}})
	tests := []struct {
		name      string
		raw       string
		method    string
		path      string
		body      string
		status    int
		inMessage string
	}{
		{"Expired", expired, "PUT", "/meshes/m1/meshservices/redis", serviceDoc, 401, "expired"},
		{"NotYetValid", future, "PUT", "/meshes/m1/meshservices/redis", serviceDoc, 401, "not valid yet"},
		{"Revoked", revoked, "PUT", "/meshes/m1/meshservices/redis", serviceDoc, 401, "revoked"},
		{"SignedByAnotherControlPlane", other.tokens[token.RoleAdmin], "PUT", "/meshes/m1/meshservices/redis", serviceDoc, 401, "signature"},
		{"AlgNone", b64(`{"alg":"none","kid":"k1"}`) + "." + parts[1] + ".", "PUT", "/meshes/m1/meshservices/redis", serviceDoc, 401, `"none"`},
		{"AlgSwappedToHS256", b64(`{"alg":"HS256","kid":"k1"}`) + "." + parts[1] + "." + parts[2], "DELETE", "/meshes/default", "", 401, `"HS256"`},
		{"Truncated", admin[:len(admin)-10], "PUT", "/meshes/m1/meshservices/redis", serviceDoc, 401, "token"},
		{"Oversized", admin + strings.Repeat("A", token.MaxTokenBytes), "PUT", "/meshes/m1/meshservices/redis", serviceDoc, 401, "too large"},
		{"Garbage", "x", "GET", "/meshes", "", 401, "malformed"},
		{"ZoneTokenOnTheUserAPI", e.tokens[token.RoleZone], "GET", "/meshes", "", 403, "zone token"},
		{"ZoneTokenWriting", e.tokens[token.RoleZone], "PUT", "/meshes/m1/meshservices/redis", serviceDoc, 403, "zone token"},
		{"ServiceOwnerWritesAGenerator", e.tokens[token.RoleServiceOwner], "PUT", "/hostnamegenerators/takeover", generatorDoc, 403, "may not write HostnameGenerator"},
		{"ServiceOwnerDeletesAGenerator", e.tokens[token.RoleServiceOwner], "DELETE", "/hostnamegenerators/local-universal-mesh-service", "", 403, "HostnameGenerator"},
		{"ServiceOwnerInAnotherMesh", ownerOfM1, "PUT", "/meshes/default/meshservices/redis", strings.Replace(serviceDoc, "mesh: m1", "mesh: default", 1), 403, `mesh "default" is not one of them`},
		{"ServiceOwnerCreatesAMesh", e.tokens[token.RoleServiceOwner], "PUT", "/meshes/m9", "type: Mesh\nname: m9\n", 403, "may not write Mesh"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.revision()
			r := e.as(tc.raw, tc.method, tc.path, tc.body)
			if r.code != tc.status || !strings.Contains(r.error().Detail, tc.inMessage) {
				t.Errorf("%s %s = %d %s; want %d mentioning %q", tc.method, tc.path, r.code, r.body, tc.status, tc.inMessage)
			}
			if tc.raw != "" && len(tc.raw) > 20 && strings.Contains(string(r.body), tc.raw) {
				t.Error("the answer repeats the token")
			}
			if tc.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer realm="meshnames"`) {
				t.Errorf("401 without WWW-Authenticate: %v", r.header)
			}
			if after := e.revision(); after != before {
				t.Errorf("a refused request changed the store: revision %d -> %d", before, after)
			}
		})
	}
	// A read-only token on every write path of the API.
	for _, d := range resource.Descriptors() {
		path := "/" + d.Plural + "/x"
		if d.MeshScoped {
			path = "/meshes/m1/" + d.Plural + "/x"
		}
		for _, method := range []string{"PUT", "DELETE"} {
			before := e.revision()
			r := e.as(e.tokens[token.RoleReadOnly], method, path, "type: "+string(d.Kind)+"\nname: x\n")
			if r.code != 403 || !strings.Contains(r.error().Detail, "role read-only may not write") {
				t.Errorf("read-only %s %s = %d %s; want 403", method, path, r.code, r.body)
			}
			if e.revision() != before {
				t.Errorf("read-only %s %s changed the store", method, path)
			}
		}
	}
	for _, path := range []string{"/tokens", "/tokens/zone", "/tokens/dataplane", "/tokens/_rotate-key"} {
		if r := e.as(e.tokens[token.RoleReadOnly], "POST", path, "{}"); r.code != 403 {
			t.Errorf("read-only POST %s = %d, want 403", path, r.code)
		}
	}
	// What the table allows does work, through the same server.
	if r := e.as(ownerOfM1, "PUT", "/meshes/m1/meshservices/redis", serviceDoc); r.code != 201 {
		t.Errorf("service owner of m1 creating a service in m1 = %d %s", r.code, r.body)
	}
	if r := e.as(e.tokens[token.RoleOperator], "PUT", "/hostnamegenerators/takeover", generatorDoc); r.code != 201 {
		t.Errorf("operator creating a generator = %d %s", r.code, r.body)
	}
}

func TestLoopbackAdmin(t *testing.T) {
	on := newSecureEnv(t, secureOptions{loopbackAdmin: true})
	if r := on.as("", "PUT", "/meshes/m1/meshservices/redis", serviceDoc); r.code != 201 {
		t.Errorf("loopback without a token, loopbackAdmin on: %d %s", r.code, r.body)
	}
	if got := on.auditEntries("?name=redis"); len(got) != 1 || got[0].Subject != auth.LoopbackSubject || got[0].Role != "admin" {
		t.Errorf("audit of the loopback write: %+v", got)
	}
	off := newSecureEnv(t, secureOptions{})
	r := off.as("", "PUT", "/meshes/m1/meshservices/redis", serviceDoc)
	if r.code != 401 || !strings.Contains(r.error().Detail, "needs a token") {
		t.Errorf("loopback without a token, loopbackAdmin off: %d %s", r.code, r.body)
	}
	if r := off.as("", "GET", "/healthz", ""); r.code != 200 {
		t.Errorf("healthz without a token: %d", r.code)
	}
}

func TestTokensAPI(t *testing.T) {
	e := newSecureEnv(t, secureOptions{})
	admin := e.tokens[token.RoleAdmin]
	r := e.as(admin, "POST", "/tokens", `{"name":"alice","role":"service-owner","meshes":["m1"],"validFor":"2h"}`)
	if r.code != 201 {
		t.Fatalf("POST /tokens = %d %s", r.code, r.body)
	}
	var issued api.TokenResponse
	if err := json.Unmarshal(r.body, &issued); err != nil {
		t.Fatal(err)
	}
	if issued.Info.Subject != "alice" || issued.Info.Role != "service-owner" || issued.Info.IssuedBy != "user-admin" ||
		issued.Info.ExpiresAt.Sub(issued.Info.IssuedAt) != 2*time.Hour || !slices.Equal(issued.Info.Meshes, []string{"m1"}) {
		t.Errorf("issued %+v", issued.Info)
	}
	// The token works, within its meshes.
	if r := e.as(issued.Token, "PUT", "/meshes/m1/meshservices/redis", serviceDoc); r.code != 201 {
		t.Errorf("the issued token writing in its mesh: %d %s", r.code, r.body)
	}
	if r := e.as(issued.Token, "GET", "/tokens", ""); r.code != 403 {
		t.Errorf("a service owner listing tokens: %d", r.code)
	}
	// Listed, never with the token.
	r = e.as(admin, "GET", "/tokens", "")
	if r.code != 200 || !strings.Contains(string(r.body), issued.Info.ID) || strings.Contains(string(r.body), issued.Token) {
		t.Errorf("GET /tokens = %d %s", r.code, r.body)
	}
	if r := e.as(admin, "GET", "/tokens/"+issued.Info.ID, ""); r.code != 200 {
		t.Errorf("GET /tokens/{id} = %d", r.code)
	}
	// Revoked: refused at once.
	if r := e.as(admin, "DELETE", "/tokens/"+issued.Info.ID, ""); r.code != 200 {
		t.Fatalf("DELETE /tokens/{id} = %d %s", r.code, r.body)
	}
	if r := e.as(issued.Token, "GET", "/meshes", ""); r.code != 401 || !strings.Contains(r.error().Detail, "revoked") {
		t.Errorf("the revoked token: %d %s", r.code, r.body)
	}
	if r := e.as(admin, "DELETE", "/tokens/nope", ""); r.code != 404 {
		t.Errorf("revoking an unknown token = %d", r.code)
	}
	// Bad requests name the field.
	for body, field := range map[string]string{
		`{"role":"operator"}`:                                  "name",
		`{"name":"a","role":"root"}`:                           "role",
		`{"name":"a","role":"zone"}`:                           "role",
		`{"name":"a","role":"admin","meshes":["m1"]}`:          "meshes",
		`{"name":"a","role":"operator","meshes":["Bad_Mesh"]}`: "meshes[0]",
		`{"name":"a","role":"operator","validFor":"forever"}`:  "validFor",
		`{"name":"a","role":"operator","validFor":"-1h"}`:      "validFor",
		`{"name":"a","role":"operator","bogus":1}`:             "body",
	} {
		r := e.as(admin, "POST", "/tokens", body)
		if r.code != 400 || !slices.Contains(r.causeFields(), field) {
			t.Errorf("POST /tokens %s = %d %s; want 400 naming %s", body, r.code, r.body, field)
		}
	}
	// Rotation: the new key signs; the old tokens keep working.
	r = e.as(admin, "POST", "/tokens/_rotate-key", "")
	if r.code != 200 || !strings.Contains(string(r.body), `"k2"`) {
		t.Fatalf("rotate = %d %s", r.code, r.body)
	}
	if r := e.as(admin, "GET", "/meshes", ""); r.code != 200 {
		t.Errorf("a token of the old key after rotation: %d", r.code)
	}
	if r := e.as(e.tokens[token.RoleOperator], "POST", "/tokens", `{"name":"mallory","role":"admin"}`); r.code != 403 {
		t.Errorf("an operator issuing an admin token = %d", r.code)
	}
	// Every token operation is audited.
	var verbs []string
	for _, a := range e.auditEntries("?limit=20") {
		if strings.Contains(a.Verb, "token") || a.Verb == api.VerbRotateKey {
			verbs = append(verbs, a.Verb+"/"+a.Result)
		}
	}
	for _, want := range []string{"issue-token/success", "revoke-token/success", "revoke-token/failed", "rotate-key/success", "issue-token/failed", "issue-token/refused"} {
		if !slices.Contains(verbs, want) {
			t.Errorf("audit has no %s entry: %v", want, verbs)
		}
	}
}

func TestTokensAPI_ZoneTokensOnlyOnGlobal(t *testing.T) {
	e := newSecureEnv(t, secureOptions{})
	r := e.as(e.tokens[token.RoleAdmin], "POST", "/tokens/zone", `{"zone":"east"}`)
	if r.code != 409 || !strings.Contains(r.error().Detail, "--mode global") {
		t.Errorf("zone token on a standalone control plane = %d %s", r.code, r.body)
	}
	g := newSecureEnv(t, secureOptions{mode: "global"})
	r = g.as(g.tokens[token.RoleAdmin], "POST", "/tokens/zone", `{"zone":"east"}`)
	if r.code != 201 || !strings.Contains(r.header.Get("Warning"), "no pin") {
		t.Errorf("zone token on a global without a sync certificate = %d %v %s", r.code, r.header, r.body)
	}

	// With a sync certificate, zone tokens carry its pin.
	pin := "sha256:" + strings.Repeat("ab", 32)
	g = newSecureEnv(t, secureOptions{mode: "global", syncPin: func() (string, error) { return pin, nil }})
	r = g.as(g.tokens[token.RoleAdmin], "POST", "/tokens/zone", `{"zone":"east"}`)
	if r.code != 201 || r.header.Get("Warning") != "" {
		t.Fatalf("POST /tokens/zone = %d %v %s", r.code, r.header, r.body)
	}
	var zone api.TokenResponse
	_ = json.Unmarshal(r.body, &zone)
	c, err := g.keys.Verify(zone.Token, time.Now())
	if err != nil || c.Role != token.RoleZone || c.Zone != "east" || c.Subject != "zone/east" || c.SyncPin != pin ||
		c.ExpiresAt.Sub(c.IssuedAt) != DefaultZoneTokenValidity {
		t.Errorf("zone token claims %+v, %v", c, err)
	}
	// It is refused on the REST API, as every zone token.
	if r := g.as(zone.Token, "GET", "/meshes", ""); r.code != 403 {
		t.Errorf("the zone token on the REST API = %d", r.code)
	}
	for body, field := range map[string]string{
		`{"zone":"East!"}`:                "zone",
		`{"zone":"east","role":"admin"}`:  "role",
		`{"zone":"east","meshes":["m1"]}`: "meshes",
		`{"zone":"east","validFor":"0s"}`: "validFor",
		`{}`:                              "zone",
	} {
		if r := g.as(g.tokens[token.RoleAdmin], "POST", "/tokens/zone", body); r.code != 400 || !slices.Contains(r.causeFields(), field) {
			t.Errorf("POST /tokens/zone %s = %d %s; want 400 naming %s", body, r.code, r.body, field)
		}
	}
}

// TestTokensAPI_DataplaneTokens: POST /tokens/dataplane issues a proxy's
// token for one Dataplane of one mesh, which the REST API refuses.
func TestTokensAPI_DataplaneTokens(t *testing.T) {
	e := newSecureEnv(t, secureOptions{})
	r := e.as(e.tokens[token.RoleAdmin], "POST", "/tokens/dataplane", `{"mesh":"m1","name":"web-1.east"}`)
	if r.code != 201 {
		t.Fatalf("POST /tokens/dataplane = %d %s", r.code, r.body)
	}
	var dp api.TokenResponse
	_ = json.Unmarshal(r.body, &dp)
	c, err := e.keys.Verify(dp.Token, time.Now())
	if err != nil || c.Role != token.RoleDataplane || c.Subject != "web-1.east" || !slices.Equal(c.Meshes, []string{"m1"}) ||
		c.ExpiresAt.Sub(c.IssuedAt) != DefaultDataplaneTokenValidity {
		t.Errorf("dataplane token claims %+v, %v", c, err)
	}
	if r := e.as(dp.Token, "GET", "/meshes/m1/dataplanes", ""); r.code != 403 || !strings.Contains(r.error().Detail, "xDS") {
		t.Errorf("the dataplane token on the REST API = %d %s", r.code, r.body)
	}
	if r := e.as(e.tokens[token.RoleOperator], "POST", "/tokens/dataplane", `{"mesh":"m1","name":"web-1"}`); r.code != 403 {
		t.Errorf("an operator issuing a dataplane token = %d, want 403 (tokens are admin's)", r.code)
	}
	for body, field := range map[string]string{
		`{"mesh":"m1"}`:                               "name",
		`{"name":"web"}`:                              "mesh",
		`{"mesh":"M1","name":"web"}`:                  "mesh",
		`{"mesh":"m1","name":"web_1"}`:                "name",
		`{"mesh":"m1","name":"web","role":"admin"}`:   "role",
		`{"mesh":"m1","name":"web","meshes":["m2"]}`:  "meshes",
		`{"mesh":"m1","name":"web","zone":"east"}`:    "zone",
		`{"mesh":"m1","name":"web","validFor":"-1h"}`: "validFor",
	} {
		if r := e.as(e.tokens[token.RoleAdmin], "POST", "/tokens/dataplane", body); r.code != 400 || !slices.Contains(r.causeFields(), field) {
			t.Errorf("POST /tokens/dataplane %s = %d %s; want 400 naming %s", body, r.code, r.body, field)
		}
	}
}

func TestRateLimit(t *testing.T) {
	e := newSecureEnv(t, secureOptions{rate: 1, burst: 3})
	ro := e.tokens[token.RoleReadOnly]
	for i := range 3 {
		if r := e.as(ro, "GET", "/meshes", ""); r.code != 200 {
			t.Fatalf("request %d within the burst = %d", i, r.code)
		}
	}
	r := e.as(ro, "GET", "/meshes", "")
	if r.code != 429 || r.header.Get("Retry-After") != "1" || !strings.Contains(r.error().Detail, "over its rate limit of 1 requests per second (api.auth.rateLimit)") {
		t.Errorf("request past the burst = %d %v %s; want 429 with Retry-After: 1", r.code, r.header.Get("Retry-After"), r.body)
	}
	// Another token has its own budget.
	if r := e.as(e.tokens[token.RoleOperator], "GET", "/meshes", ""); r.code != 200 {
		t.Errorf("another token = %d", r.code)
	}
}

// adapter get the policy's answers with the caller's token.
func TestKumaAdapter_SameAnswers(t *testing.T) {
	e := newSecureEnv(t, secureOptions{kuma: true})
	doc := `{"type":"MeshService","name":"redis","mesh":"m1","spec":{"ports":[{"port":6379,"targetPort":6379,"appProtocol":"tcp"}]}}`
	send := func(raw, method, path, body string) reply {
		h := []string{}
		if raw != "" {
			h = append(h, "Authorization", "Bearer "+raw)
		}
		ct := ""
		if body != "" {
			ct = "application/json"
		}
		return e.do(method, path, ct, body, h...)
	}
	for _, tc := range []struct {
		raw          string
		method, path string
		body         string
		code         int
	}{
		{"", "GET", "/kuma/meshes", "", 401},
		{e.tokens[token.RoleZone], "GET", "/kuma/meshes", "", 403},
		{e.tokens[token.RoleReadOnly], "GET", "/kuma/meshes", "", 200},
		{e.tokens[token.RoleReadOnly], "PUT", "/kuma/meshes/m1/meshservices/redis", doc, 403},
		{e.tokens[token.RoleServiceOwner], "PUT", "/kuma/meshes/m1/meshservices/redis", doc, 201},
	} {
		if r := send(tc.raw, tc.method, tc.path, tc.body); r.code != tc.code {
			t.Errorf("%s %s as %q = %d %s, want %d", tc.method, tc.path, tc.raw[:min(len(tc.raw), 10)], r.code, r.body, tc.code)
		}
	}
	if got := e.auditEntries("?name=redis"); len(got) != 2 || got[0].Result != api.ResultSuccess || got[1].Result != api.ResultRefused {
		t.Errorf("audit of writes through the adapter: %+v", got)
	}
}
