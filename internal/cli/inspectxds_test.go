package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestInspectXDS_Paths: each form of inspect xds asks its path, and a
// form that is neither says what it wants.
func TestInspectXDS_Paths(t *testing.T) {
	for _, tt := range []struct {
		name, args, path, want string
	}{
		{name: "dataplane", args: "inspect xds default/web-1", path: "/meshes/default/dataplanes/web-1/_xds", want: "mesh: default\ndataplane: web-1\n"},
		{name: "zoneingress", args: "inspect xds zoneingress ingress-1", path: "/zoneingresses/ingress-1/_xds", want: "zoneIngress: ingress-1\n"},
		{name: "zoneingress-json", args: "inspect xds zoneingress ingress-1 -o json", path: "/zoneingresses/ingress-1/_xds", want: `"zoneIngress": "ingress-1"`},
		{name: "no-slash", args: "inspect xds web-1", want: `"web-1" is not MESH/DATAPLANE, such as default/web-1 (a ZoneIngress: zoneingress NAME)`},
		{name: "other-kind", args: "inspect xds dataplane web-1", want: `give MESH/DATAPLANE, or zoneingress NAME; "dataplane web-1" is neither`},
		{name: "nothing", args: "inspect xds", want: "give MESH/DATAPLANE, such as default/web-1, or zoneingress NAME"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked = append(asked, r.URL.Path)
				w.Header().Set("Content-Type", "application/json")
				switch r.URL.Path {
				case "/meshes/default/dataplanes/web-1/_xds":
					_, _ = w.Write([]byte(`{"mesh":"default","dataplane":"web-1","instance":"i","streams":[],"config":{}}`))
				case "/zoneingresses/ingress-1/_xds":
					_, _ = w.Write([]byte(`{"zoneIngress":"ingress-1","instance":"i","streams":[],"config":{}}`))
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			var out bytes.Buffer
			runCLI(&out, srv.URL, strings.Fields(tt.args))
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
			if tt.path == "" && len(asked) != 0 || tt.path != "" && (len(asked) != 1 || asked[0] != tt.path) {
				t.Errorf("asked %v, want %q", asked, tt.path)
			}
		})
	}
}
