package apiserver

import (
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

// EveryProblemDocuments are documents of every kind that mix what does not
// decode (unknown fields, an empty port name, a wrong type) with rules the
// rest breaks, and the path of every problem, sorted. The Kuma adapter's
// test holds the same documents in Kuma's shape.
var everyProblemDocuments = []struct {
	name, path, doc string
	fields          []string
}{
	{"MeshService", "/meshes/default/meshservices/redis", `type: MeshService
name: redis
mesh: default
bogus: 1
labels:
  kuma.io/zone: west
spec:
  selector:
    dataplaneTags: {app: redis}
    dataplaneRef: {name: redis-1}
  ports:
  - port: 70000
    name: ""
    appProtocol: udp
    extra: true
  - port: 6379
    targetPort: "6379"
  state: Sleeping
`, []string{
		"bogus",
		`labels["kuma.io/zone"]`,
		"spec.ports[0].appProtocol",
		"spec.ports[0].extra",
		"spec.ports[0].name",
		"spec.ports[0].port",
		"spec.ports[1].targetPort",
		"spec.selector",
		"spec.state",
	}},
	// The MeshExternalService of the report that every problem should be
	// named at once: a file and an environment variable as data sources,
	// ports out of range, a tls section the destination type forbids and
	// versions that do not exist.
	{"MeshExternalService", "/meshes/default/meshexternalservices/httpbin", `type: MeshExternalService
name: httpbin
mesh: default
spec:
  match:
  - {type: Domain, value: httpbin.org, port: 70000, protocol: http}
  destination:
    type: Passthrough
    endpoints:
    - {address: 1.1.1.1, port: 0}
    tls:
      version: {min: TLS9, max: TLS14}
      caCert: {file: /etc/ca.pem}
      clientCert: {envVar: CLIENT_CERT}
`, []string{
		"spec.destination.endpoints",
		"spec.destination.endpoints[0].port",
		"spec.destination.tls",
		"spec.destination.tls.caCert",
		"spec.destination.tls.caCert.file",
		"spec.destination.tls.clientCert",
		"spec.destination.tls.clientCert.envVar",
		"spec.destination.tls.clientKey",
		"spec.destination.tls.version.max",
		"spec.destination.tls.version.min",
		"spec.match[0].port",
	}},
	{"MeshMultiZoneService", "/meshes/default/meshmultizoneservices/backend", `type: MeshMultiZoneService
name: backend
mesh: default
spec:
  selector:
    meshService:
      matchLabels: {}
      matchExpressions: []
  ports:
  - {port: 0, name: ""}
  - {port: 80, name: Http, targetPort: 8080}
`, []string{
		"spec.ports[0].name",
		"spec.ports[0].port",
		"spec.ports[1].name",
		"spec.ports[1].targetPort",
		"spec.selector.meshService.matchExpressions",
		"spec.selector.meshService.matchLabels",
	}},
	{"HostnameGenerator", "/hostnamegenerators/by-team", `type: HostnameGenerator
name: by-team
labels:
  kuma.io/display-name: other
spec:
  targetRef: {kind: Mesh}
  selector:
    meshService: {matchLabels: {team: a}}
    meshExternalService: {}
  template: '{{ .Name }}.Mesh.Local'
`, []string{
		`labels["kuma.io/display-name"]`,
		"spec.selector",
		"spec.targetRef",
		"spec.template",
	}},
	{"Dataplane", "/meshes/default/dataplanes/dp-1", `type: Dataplane
name: dp-1
mesh: default
spec:
  networking:
    address: 0.0.0.0
    gateway: {type: BUILTIN}
    inbound:
    - {port: 70000, name: "", tags: {kuma.io/service: web}}
    - {port: 8080, servicePort: seven, tags: {app: web}}
`, []string{
		"spec.networking.address",
		"spec.networking.gateway",
		"spec.networking.inbound[0].name",
		"spec.networking.inbound[0].port",
		"spec.networking.inbound[1].servicePort",
		`spec.networking.inbound[1].tags`,
	}},
	{"Mesh", "/meshes/payments", `type: Mesh
name: payments
labels:
  "a b": x
spec:
  mtls: {enabledBackend: ca-1}
`, []string{
		`labels["a b"]`,
		"spec.mtls",
	}},
}

// One PUT answers every problem of a document in one 400: what does not
// decode and the rules the rest breaks, each with its path; nothing is
// written.
func TestPut_EveryProblemAtOnce(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	for _, tt := range everyProblemDocuments {
		t.Run(tt.name, func(t *testing.T) {
			r := e.put(tt.path, tt.doc)
			if r.code != http.StatusBadRequest {
				t.Fatalf("PUT %s = %d, want 400: %s", tt.path, r.code, r.body)
			}
			var params []string
			for _, p := range r.error().InvalidParameters {
				params = append(params, p.Field)
			}
			slices.Sort(params)
			if d := cmp.Diff(tt.fields, params); d != "" {
				t.Errorf("invalid_parameters (-want +got):\n%s\nbody: %s", d, r.body)
			}
			if d := cmp.Diff(tt.fields, r.causeFields()); d != "" {
				t.Errorf("causes (-want +got):\n%s", d)
			}
			if g := e.do(http.MethodGet, tt.path, "", ""); g.code != http.StatusNotFound {
				t.Errorf("GET %s after the refused PUT = %d, want 404", tt.path, g.code)
			}
		})
	}
}
