package apiserver

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/token"
)

// TestGUI_BehindTheGuard checks the GUI's place in the API: mounted at
// /gui/, read by every user role, its static files public, a browser
// refused a page answered by GUIPrompt, an API client with the JSON error,
// and browsers sent from / to it.
func TestGUI_BehindTheGuard(t *testing.T) {
	gui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "gui "+r.URL.Path) })
	prompt := func(w http.ResponseWriter, r *http.Request, status int, reason string) {
		w.WriteHeader(status)
		fmt.Fprintf(w, "prompt %d: %s", status, reason)
	}
	e := newSecureEnv(t, secureOptions{gui: gui, guiPrompt: prompt})
	const browser = "text/html,application/xhtml+xml,*/*;q=0.8"
	tests := []struct {
		name, token, accept, path string
		code                      int
		body                      string
	}{
		{"read-only reads a page", e.tokens[token.RoleReadOnly], browser, "/gui/services", 200, "gui /gui/services"},
		{"service-owner reads a page", e.tokens[token.RoleServiceOwner], "", "/gui/", 200, "gui /gui/"},
		{"static files need no token", "", browser, "/gui/static/gui.js", 200, "gui /gui/static/gui.js"},
		{"a browser without a token gets the prompt", "", browser, "/gui/services", 401, "prompt 401: "},
		{"a browser with a zone token gets the prompt", e.tokens[token.RoleZone], browser, "/gui/", 403, "prompt 403: a zone token"},
		{"a script without a token gets JSON", "", "", "/gui/_wait?rev=1", 401, `"status":401`},
		{"a bad token is refused", "garbage", browser, "/gui/", 401, "prompt 401: "},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			h := []string{}
			if tt.token != "" {
				h = append(h, "Authorization", "Bearer "+tt.token)
			}
			if tt.accept != "" {
				h = append(h, "Accept", tt.accept)
			}
			r := e.do(http.MethodGet, tt.path, "", "", h...)
			if r.code != tt.code || !strings.Contains(string(r.body), tt.body) {
				t.Errorf("GET %s = %d %s, want %d with %q", tt.path, r.code, r.body, tt.code, tt.body)
			}
		})
	}
	// A write under /gui/ is admin's only, as for any path the policy does
	// not know; the GUI itself answers 405.
	if r := e.as(e.tokens[token.RoleOperator], http.MethodPost, "/gui/services", "x: y"); r.code != http.StatusForbidden {
		t.Errorf("POST /gui/services as operator = %d, want 403", r.code)
	}
}

// TestIndex_RedirectsBrowsersToTheGUI checks GET / with and without a GUI.
func TestIndex_RedirectsBrowsersToTheGUI(t *testing.T) {
	with := newSecureEnv(t, secureOptions{gui: http.NotFoundHandler(), loopbackAdmin: true})
	without := newSecureEnv(t, secureOptions{loopbackAdmin: true})
	for _, tt := range []struct {
		e        *secureEnv
		accept   string
		code     int
		location string
	}{
		{with, "text/html", http.StatusSeeOther, "/gui/"},
		{with, "application/json", http.StatusOK, ""},
		{with, "*/*", http.StatusOK, ""},
		{without, "text/html", http.StatusOK, ""},
	} {
		req, _ := http.NewRequest(http.MethodGet, tt.e.srv.URL+"/", nil)
		req.Header.Set("Accept", tt.accept)
		resp, err := http.DefaultTransport.RoundTrip(req) // no redirect followed
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.code || resp.Header.Get("Location") != tt.location {
			t.Errorf("GET / Accept %q: %d to %q, want %d to %q", tt.accept, resp.StatusCode, resp.Header.Get("Location"), tt.code, tt.location)
		}
	}
}
