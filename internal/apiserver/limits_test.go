package apiserver

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/token"
)

// TestLimits: past each configured bound a request gets 413 with a
// message naming the limit and its setting, and writes nothing; within
// them it is served.
func TestLimits(t *testing.T) {
	e := newSecureEnv(t, secureOptions{kuma: true, limits: Limits{MaxBodyBytes: 4096, MaxApplyBytes: 8192, MaxApplyDocuments: 3}})
	admin := e.tokens[token.RoleAdmin]
	service := func(name string, pad int) string {
		return fmt.Sprintf(`{"type":"MeshService","mesh":"default","name":%q,"labels":{"pad":%q},"spec":{"ports":[{"port":80}]}}`, name, strings.Repeat("x", pad))
	}
	items := func(n, pad int) string {
		var docs []string
		for i := range n {
			docs = append(docs, service(fmt.Sprintf("s%d", i), pad))
		}
		return `{"items":[` + strings.Join(docs, ",") + `]}`
	}
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		detail                   string
	}{
		{name: "body-within", method: http.MethodPut, path: "/meshes/default/meshservices/small", body: service("small", 10), code: http.StatusCreated},
		{name: "body-over", method: http.MethodPut, path: "/meshes/default/meshservices/big", body: service("big", 5000), code: http.StatusRequestEntityTooLarge,
			detail: "the request body exceeds the limit of 4096 bytes (api.limits.maxBodyBytes)"},
		{name: "kuma-body-over", method: http.MethodPut, path: "/kuma/meshes/default/meshservices/big", body: service("big", 5000), code: http.StatusRequestEntityTooLarge,
			detail: "the request body exceeds the limit of 4096 bytes (api.limits.maxBodyBytes)"},
		{name: "token-body-over", method: http.MethodPost, path: "/tokens", body: `{"name":"` + strings.Repeat("x", 5000) + `"}`, code: http.StatusRequestEntityTooLarge,
			detail: "(api.limits.maxBodyBytes)"},
		{name: "apply-within", method: http.MethodPost, path: "/_apply?dryRun=true", body: items(3, 10), code: http.StatusOK},
		{name: "apply-documents-over", method: http.MethodPost, path: "/_apply?dryRun=true", body: items(4, 10), code: http.StatusRequestEntityTooLarge,
			detail: "the request holds 4 documents, over the limit of 3 (api.limits.maxApplyDocuments)"},
		{name: "apply-bytes-over", method: http.MethodPost, path: "/_apply?dryRun=true", body: items(2, 5000), code: http.StatusRequestEntityTooLarge,
			detail: "the request body exceeds the limit of 8192 bytes (api.limits.maxApplyBytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.as(admin, tc.method, tc.path, tc.body)
			if r.code != tc.code {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, r.code, r.body, tc.code)
			}
			if tc.detail != "" && !strings.Contains(string(r.body), tc.detail) {
				t.Errorf("%s %s: %s, want it to say %q", tc.method, tc.path, r.body, tc.detail)
			}
		})
	}
	if r := e.as(admin, http.MethodGet, "/meshes/default/meshservices/big", ""); r.code != http.StatusNotFound {
		t.Errorf("GET of the refused service = %d, want 404", r.code)
	}
}
