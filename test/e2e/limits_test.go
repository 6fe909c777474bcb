package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLimits_FromConfiguration: the limits of api.limits and
// api.auth.rateLimit, set in a configuration file, bound a real server:
// a body, the documents of `meshnames apply` and a token's rate, each
// refused with 413 or 429 and a message naming the setting.
func TestLimits_FromConfiguration(t *testing.T) {
	t.Parallel() // the rate is 1 a second: a slower machine only makes it likelier
	dir := t.TempDir()
	cfg := filepath.Join(dir, "meshnames.yaml")
	if err := os.WriteFile(cfg, []byte(`api:
  limits:
    maxBodyBytes: 4096
    maxApplyDocuments: 3
  auth:
    rateLimit: 1
    rateBurst: 1
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "limited", "--config", cfg)
	p.waitReady(time.Minute)

	big := fmt.Sprintf(`{"type":"MeshService","name":"big","mesh":"default","labels":{"pad":%q},"spec":{"ports":[{"port":80}]}}`, strings.Repeat("x", 5000))
	req, _ := http.NewRequest(http.MethodPut, p.api+msPath("big"), strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("PUT of 5 KB over a 4 KiB limit = %d, want 413", resp.StatusCode)
	}

	var docs []string
	for i := range 4 {
		docs = append(docs, fmt.Sprintf("type: MeshService\nname: s%d\nmesh: default\nspec:\n  ports:\n  - port: 80\n", i))
	}
	file := filepath.Join(dir, "four.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := cli(t, nil, "--server", p.api, "apply", "-f", file)
	if err == nil || !strings.Contains(out+errOut, "over the limit of 3 (api.limits.maxApplyDocuments)") {
		t.Errorf("apply of 4 documents over a limit of 3: %v\n%s%s", err, out, errOut)
	}

	tok, errOut, err := cli(t, nil, "--server", p.api, "token", "user", "--name", "carol", "--role", "read-only", "--valid-for", "1h")
	if err != nil {
		t.Fatalf("token user: %v\n%s", err, errOut)
	}
	get := func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, p.api+"/meshes", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var code int
	var body string
	for range 5 { // a burst of 1: the second within the second is refused
		if code, body = get(); code == http.StatusTooManyRequests {
			break
		}
	}
	if code != http.StatusTooManyRequests || !strings.Contains(body, "(api.auth.rateLimit)") {
		t.Errorf("requests past a rate of 1 a second: %d %s, want 429 naming api.auth.rateLimit", code, body)
	}
}
