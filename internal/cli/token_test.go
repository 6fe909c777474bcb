package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/server/servertest"
)

// runWith runs one command in-process with the environment vars.
func runWith(server string, vars map[string]string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	env := Env{
		In: strings.NewReader(""), Out: &out, Err: &errOut, Now: time.Now,
		Getenv: func(k string) (string, bool) {
			if k == ServerEnv {
				return server, true
			}
			v, ok := vars[k]
			return v, ok
		},
	}
	root := New(env)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// TestTokenCommands issues a token from the server's host (loopback:
// admin), uses it from a file and from the environment, lists and revokes
// it, and finds it all in the audit log.
func TestTokenCommands(t *testing.T) {
	url := servertest.Start(t, config.Default(), servertest.Options{NoControllers: true})
	out, stderr, err := runWith(url, nil, "token", "user", "--name", "alice", "--role", "read-only", "--mesh", "default", "--valid-for", "1h")
	if err != nil {
		t.Fatalf("token user: %v", err)
	}
	tok := strings.TrimSpace(out)
	if strings.Count(tok, ".") != 2 || strings.Contains(out, " ") {
		t.Fatalf("token user printed %q; want the token alone", out)
	}
	if !strings.Contains(stderr, "for alice (read-only, meshes default), valid until") {
		t.Errorf("token user stderr %q", stderr)
	}
	file := filepath.Join(t.TempDir(), "alice.token")
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Reads work with the token; writes are refused with the reason.
	if out, _, err := runWith(url, nil, "--token-file", file, "get", "meshes"); err != nil || !strings.Contains(out, "default") {
		t.Errorf("get meshes with the token: %q, %v", out, err)
	}
	doc := filepath.Join(t.TempDir(), "svc.yaml")
	if err := os.WriteFile(doc, []byte(serviceYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runWith(url, map[string]string{TokenEnv: tok}, "apply", "-f", doc); err == nil {
		t.Error("apply with a read-only token succeeded")
	}
	out, stderr, _ = runWith(url, map[string]string{TokenEnv: tok}, "apply", "-f", doc)
	if !strings.Contains(out+stderr, "role read-only may not write MeshService") {
		t.Errorf("apply with a read-only token: %q %q; want the reason", out, stderr)
	}

	// Listed, then revoked, then refused.
	out, _, err = runWith(url, nil, "token", "list")
	if err != nil || !strings.Contains(out, "alice") || !strings.Contains(out, "read-only") || !strings.Contains(out, "active") {
		t.Fatalf("token list: %q, %v", out, err)
	}
	id := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "alice") {
			id = strings.Fields(line)[0]
		}
	}
	if out, _, err := runWith(url, nil, "token", "revoke", id); err != nil || !strings.Contains(out, "Token "+id+" of alice (read-only, meshes default) revoked.") {
		t.Errorf("token revoke: %q, %v", out, err)
	}
	_, _, err = runWith(url, nil, "--token-file", file, "get", "meshes")
	if err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("get meshes with the revoked token: %v", err)
	}
	if out, _, _ := runWith(url, nil, "token", "list"); !strings.Contains(out, "revoked by loopback") {
		t.Errorf("token list after revoke: %q", out)
	}

	// The audit log holds the issue, the refusal and the revocation.
	out, _, err = runWith(url, nil, "audit")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"issue-token", "revoke-token", "read-only", "put", "refused", "403"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit output lacks %q:\n%s", want, out)
		}
	}
	if out, _, _ := runWith(url, nil, "audit", "--subject", "nobody"); out != "No audit entries match.\n" {
		t.Errorf("audit --subject nobody = %q", out)
	}

	// Bad credentials are named.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--token-file", filepath.Join(t.TempDir(), "missing"), "get", "meshes"}, "--token-file"},
		{[]string{"--ca-file", file, "get", "meshes"}, "--ca-file: " + file + " holds no PEM certificate"},
		{[]string{"token", "user", "--name", "bob"}, `required flag(s) "role" not set`},
		{[]string{"token", "user", "--name", "bob", "--role", "root"}, "role: must be one of admin, operator, service-owner, read-only"},
		{[]string{"token", "zone", "--zone", "east"}, "--mode global"},
		{[]string{"inspect", "history"}, "exactly one of --vip IP and --hostname NAME"},
	} {
		if _, _, err := runWith(url, nil, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	if err := os.WriteFile(file, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runWith(url, nil, "--token-file", file, "get", "meshes"); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty token file: %v", err)
	}
}

const serviceYAML = `type: MeshService
name: redis
mesh: default
spec:
  ports:
  - port: 6379
    targetPort: 6379
    appProtocol: tcp
`

// TestInspectHistory renders history answers.
func TestInspectHistory(t *testing.T) {
	body := `{"vip":"241.0.0.7","holders":[
{"zone":"east","mesh":"default","kind":"MeshService","name":"old","until":"2026-01-02T03:00:00Z","end":"released","reason":"deleted"},
{"zone":"east","mesh":"default","kind":"MeshService","name":"redis","from":"2026-01-02T03:05:00Z"}],
"events":[
{"seq":3,"time":"2026-01-02T03:00:00Z","zone":"east","mesh":"default","kind":"MeshService","name":"old","vip":"241.0.0.7","event":"released","reason":"deleted"},
{"seq":9,"time":"2026-01-02T03:05:00Z","zone":"east","mesh":"default","kind":"MeshService","name":"redis","vip":"241.0.0.7","event":"assigned"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("vip") {
		case "241.0.0.7":
			_, _ = w.Write([]byte(body))
		default:
			_, _ = w.Write([]byte(`{"vip":"` + r.URL.Query().Get("vip") + `","holders":[],"events":[]}`))
		}
	}))
	defer srv.Close()
	out, _, err := runWith(srv.URL, nil, "inspect", "history", "--vip", "241.0.0.7")
	if err != nil {
		t.Fatal(err)
	}
	want := `Holders of 241.0.0.7:
ZONE  MESH     KIND         NAME   FROM                       UNTIL                 END       REASON
east  default  MeshService  old    (before the history kept)  2026-01-02T03:00:00Z  released  deleted
east  default  MeshService  redis  2026-01-02T03:05:00Z       (holds it)            -         -

TIME                  EVENT     ZONE  MESH     KIND         NAME   REASON
2026-01-02T03:00:00Z  released  east  default  MeshService  old    deleted
2026-01-02T03:05:00Z  assigned  east  default  MeshService  redis  -
`
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("inspect history (-want +got):\n%s", d)
	}
	out, _, err = runWith(srv.URL, nil, "inspect", "history", "--vip", "241.0.0.9")
	if err != nil || out != "No service held 241.0.0.9 in the history kept.\n" {
		t.Errorf("empty history: %q, %v", out, err)
	}
}

// TestTokenDataplane issues a proxy's token: the token alone on standard
// output, what it is for on standard error, listed with its role; a bad
// name is refused naming the field.
func TestTokenDataplane(t *testing.T) {
	url := servertest.Start(t, config.Default(), servertest.Options{NoControllers: true})
	out, stderr, err := runWith(url, nil, "token", "dataplane", "--mesh", "default", "--name", "web-1", "--ttl", "2h")
	if err != nil {
		t.Fatalf("token dataplane: %v", err)
	}
	if tok := strings.TrimSpace(out); strings.Count(tok, ".") != 2 || strings.Contains(tok, " ") {
		t.Fatalf("token dataplane printed %q; want the token alone", out)
	}
	if !strings.Contains(stderr, "for dataplane web-1 of mesh default, valid until") {
		t.Errorf("token dataplane stderr %q", stderr)
	}
	if out, _, err := runWith(url, nil, "token", "list"); err != nil || !strings.Contains(out, "dataplane") || !strings.Contains(out, "web-1") {
		t.Errorf("token list: %q, %v", out, err)
	}
	_, _, err = runWith(url, nil, "token", "dataplane", "--name", "Web_1")
	if err == nil || !strings.Contains(err.Error(), "name") {
		t.Errorf("token dataplane with a bad name: %v; want an error naming the field", err)
	}
}
