package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInstallCRDs: the system namespace reaches the admission policy that
// keeps HostnameGenerators and MeshExternalServices in it.
func TestInstallCRDs(t *testing.T) {
	for _, tt := range []struct{ args, want string }{
		{"install crds", `object.metadata.namespace == "meshnames-system"`},
		{"install crds --system-namespace kuma-system", `object.metadata.namespace == "kuma-system"`},
	} {
		var out bytes.Buffer
		runCLI(&out, "http://127.0.0.1:1", strings.Fields(tt.args))
		if !strings.Contains(out.String(), tt.want) || !strings.Contains(out.String(), "name: meshservices.kuma.io") {
			t.Errorf("%s: the output lacks %s or the MeshService CRD", tt.args, tt.want)
		}
	}
}

// TestInspectLeader renders the leader endpoint's answers (a server whose
// identity changes from run to run cannot be in a golden file).
func TestInspectLeader(t *testing.T) {
	tests := []struct {
		name, body, args, want string
	}{
		{name: "lease-follower", args: "inspect leader",
			body: `{"election":"lease","holder":"cp-1/127.0.0.1:5681/41/a1b2c3","term":7,"expiresAt":"2026-01-02T03:09:17.5Z","self":"cp-2/127.0.0.1:5682/42/d4e5f6","leading":false}`,
			want: "Election:    lease (instances sharing PostgreSQL)\n" +
				"Leader:      cp-1/127.0.0.1:5681/41/a1b2c3\n" +
				"Term:        7\n" +
				"Expires:     2026-01-02T03:09:17.5Z (in 12.5s unless renewed)\n" +
				"This server: cp-2/127.0.0.1:5682/42/d4e5f6 (follower)\n"},
		{name: "lease-leader", args: "inspect leader",
			body: `{"election":"lease","holder":"cp-1","term":1,"expiresAt":"2026-01-02T03:09:20Z","self":"cp-1","leading":true}`,
			want: "Election:    lease (instances sharing PostgreSQL)\nLeader:      cp-1\nTerm:        1\n" +
				"Expires:     2026-01-02T03:09:20Z (in 15s unless renewed)\nThis server: cp-1 (leader)\n"},
		{name: "lease-ran-out", args: "inspect leader",
			body: `{"election":"lease","holder":"cp-1","term":3,"expiresAt":"2026-01-02T03:09:02Z","self":"cp-2","leading":false}`,
			want: "Election:    lease (instances sharing PostgreSQL)\nLeader:      none (the lease of cp-1, term 3, ran out 3s ago)\nThis server: cp-2 (follower)\n"},
		{name: "lease-never-held", args: "inspect leader",
			body: `{"election":"lease","self":"cp-2","leading":false}`,
			want: "Election:    lease (instances sharing PostgreSQL)\nLeader:      none\nThis server: cp-2 (follower)\n"},
		{name: "kubernetes", args: "inspect leader",
			body: `{"election":"kubernetes","holder":"cp-1","term":2,"expiresAt":"2026-01-02T03:09:20Z","self":"cp-1","leading":true}`,
			want: "Election:    kubernetes (instances on one cluster: the Lease meshnames-leader)\nLeader:      cp-1\nTerm:        2\n" +
				"Expires:     2026-01-02T03:09:20Z (in 15s unless renewed)\nThis server: cp-1 (leader)\n"},
		{name: "local", args: "inspect leader",
			body: `{"election":"local","holder":"cp-1","self":"cp-1","leading":true}`,
			want: "Election:    local (embedded store: the one process leads)\nLeader:      cp-1\nThis server: cp-1 (leader)\n"},
		{name: "json", args: "inspect leader -o json",
			body: `{"election":"local","holder":"cp-1","self":"cp-1","leading":true}`,
			want: "{\n  \"election\": \"local\",\n  \"holder\": \"cp-1\",\n  \"self\": \"cp-1\",\n  \"leading\": true\n}\n"},
		{name: "bad-output", args: "inspect leader -o yaml", body: `{}`,
			want: "Error: invalid --output \"yaml\": use table or json\n[exit 1]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/_leader" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			var out bytes.Buffer
			runCLI(&out, srv.URL, strings.Fields(tt.args))
			if d := cmp.Diff(tt.want, out.String()); d != "" {
				t.Errorf("output (-want +got):\n%s", d)
			}
		})
	}
}
