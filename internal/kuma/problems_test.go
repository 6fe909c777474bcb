package kuma

import (
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A document written through the adapter is refused with every problem in
// one invalid_parameters list, as kumactl prints it: what Kuma's shape
// does not decode, what the translation refuses, and the native write
// path's rules that the rest breaks, at their paths in the Kuma document.
// The native API's test (apiserver TestPut_EveryProblemAtOnce) holds the
// same documents in the native shape.
func TestAdapter_EveryProblemAtOnce(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, path, doc string
		fields          []string
	}{
		{"MeshService", "/kuma/meshes/default/meshservices/redis", `{"type":"MeshService","name":"redis","mesh":"default","bogus":1,
			"labels":{"kuma.io/zone":"west"},
			"spec":{"selector":{"dataplaneTags":{"app":"redis"}},"export":{"mode":"All"},"state":"Sleeping",
				"ports":[{"port":70000,"name":"","appProtocol":"udp","extra":true},{"port":6379,"targetPort":"6379"}]}}`,
			[]string{
				"bogus",
				`labels["kuma.io/zone"]`,
				"spec.export",
				"spec.ports[0].appProtocol",
				"spec.ports[0].extra",
				"spec.ports[0].name",
				"spec.ports[0].port",
				"spec.ports[1].targetPort",
				"spec.selector.dataplaneTags",
				"spec.state",
			}},
		// The document of the report that every problem should be named at
		// once, in Kuma's shape: a file and an environment variable as data
		// sources, a port out of range, tls beside an extension (which
		// forbids it) and versions that do not exist.
		{"MeshExternalService", "/kuma/meshes/default/meshexternalservices/httpbin", `{"type":"MeshExternalService","name":"httpbin","mesh":"default",
			"spec":{"match":{"type":"HostnameGenerator","port":70000,"protocol":"http"},"extension":{"type":"Lambda"},
				"tls":{"version":{"min":"TLS9","max":"TLS14"},
					"verification":{"caCert":{"type":"File","file":{"path":"/etc/ca.pem"}},"clientCert":{"envVar":{"name":"CERT"}}}}}}`,
			[]string{
				"spec.match.port",
				"spec.tls",
				"spec.tls.verification.caCert.type",
				"spec.tls.verification.clientCert.type",
				"spec.tls.version.max",
				"spec.tls.version.min",
			}},
		{"MeshMultiZoneService", "/kuma/meshes/default/meshmultizoneservices/backend", `{"type":"MeshMultiZoneService","name":"backend","mesh":"default",
			"spec":{"selector":{"meshService":{"matchLabels":{},"matchExpressions":[]}},
				"ports":[{"port":0,"name":""},{"port":80,"name":"Http","targetPort":8080}]}}`,
			[]string{
				"spec.ports[0].name",
				"spec.ports[0].port",
				"spec.ports[1].name",
				"spec.ports[1].targetPort",
				"spec.selector.meshService.matchExpressions",
				"spec.selector.meshService.matchLabels",
			}},
		{"HostnameGenerator", "/kuma/hostnamegenerators/by-team", `{"type":"HostnameGenerator","name":"by-team","labels":{"kuma.io/display-name":"other"},
			"spec":{"targetRef":{"kind":"Mesh"},"extension":{"config":{}},
				"selector":{"meshService":{"matchLabels":{"team":"a"}},"meshExternalService":{}},"template":"{{ .Name }}.Mesh.Local"}}`,
			[]string{
				`labels["kuma.io/display-name"]`,
				"spec.extension",
				"spec.selector",
				"spec.targetRef",
				"spec.template",
			}},
		{"Dataplane", "/kuma/meshes/default/dataplanes/dp-1", `{"type":"Dataplane","name":"dp-1","mesh":"default",
			"networking":{"address":"0.0.0.0","gateway":{"type":"BUILTIN"},
				"inbound":[{"port":70000,"name":"","tags":{"kuma.io/service":"web"}},{"port":8080,"servicePort":"seven"}]}}`,
			[]string{
				"networking.address",
				"networking.gateway",
				"networking.inbound[0].name",
				"networking.inbound[0].port",
				"networking.inbound[0].tags",
				"networking.inbound[1].servicePort",
			}},
		{"Mesh", "/kuma/meshes/payments", `{"type":"Mesh","name":"payments","labels":{"a b":"x"},"mtls":{"enabledBackend":"ca-1"}}`,
			[]string{
				`labels["a b"]`,
				"mtls",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(http.MethodPut, tt.path, tt.doc)
			if r.code != http.StatusBadRequest {
				t.Fatalf("PUT %s = %d, want 400: %s", tt.path, r.code, r.body)
			}
			var got kumaError
			r.json(t, &got)
			params := fields(got)
			slices.Sort(params)
			if d := cmp.Diff(tt.fields, params); d != "" {
				t.Errorf("invalid_parameters (-want +got):\n%s\nbody: %s", d, r.body)
			}
			if g := e.do(http.MethodGet, tt.path, ""); g.code != http.StatusNotFound {
				t.Errorf("GET %s after the refused PUT = %d, want 404", tt.path, g.code)
			}
		})
	}
}
