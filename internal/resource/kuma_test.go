package resource

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/validate"
)

// The documents kumactl (Kuma 2.13 and later) sends: kri and snis at the top
// level, flat Meshes, Zones and Dataplanes, Kuma 3.x inbounds without tags
// and MeshServices selecting by labels. Each is accepted and stored as its
// native equivalent.
func TestDecode_KumaDocuments(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want *Object
	}{
		{"KRIAndSNIsIgnored", `
type: MeshService
name: redis
mesh: default
kri: kri_msvc_default_east__redis_
snis:
- {port: 6379, sni: sni.msvc.default.east.redis.6379}
spec:
  selector:
    dataplaneLabels:
      matchLabels: {app: redis}
  ports:
  - port: 6379
`, &Object{Kind: MeshService, Name: "redis", Mesh: "default", Spec: &MeshServiceSpec{
			Selector: MeshServiceSelector{DataplaneLabels: &LabelSelector{MatchLabels: map[string]string{"app": "redis"}}},
			Ports:    []Port{{Port: 6379, AppProtocol: ProtocolTCP}},
		}}},
		{"FlatZone", "type: Zone\nname: east\nenabled: false\nkri: kri_z____east_\n",
			&Object{Kind: Zone, Name: "east", Spec: &ZoneSpec{Enabled: new(false)}}},
		{"FlatMesh", "type: Mesh\nname: payments\nkri: kri_m____payments_\n",
			&Object{Kind: Mesh, Name: "payments", Spec: &MeshSpec{}}},
		{"FlatDataplaneWithoutTags", `
type: Dataplane
name: redis-1
mesh: default
labels: {app: redis}
networking:
  address: 10.0.0.1
  inbound:
  - {port: 6379, name: main}
`, &Object{Kind: Dataplane, Name: "redis-1", Mesh: "default", Labels: map[string]string{"app": "redis"},
			Spec: &DataplaneSpec{Networking: DataplaneNetworking{Address: "10.0.0.1", Inbound: []Inbound{{Port: 6379, Name: "main"}}}}}},
		{"FlatZoneIngress", `
type: ZoneIngress
name: ingress-1
networking:
  address: 192.168.0.1
  advertisedAddress: 10.0.0.1
  port: 10001
  advertisedPort: 10000
`, &Object{Kind: ZoneIngress, Name: "ingress-1", Spec: &ZoneIngressSpec{Networking: ZoneIngressNetworking{
			Address: "192.168.0.1", AdvertisedAddress: "10.0.0.1", Port: 10001, AdvertisedPort: 10000}}}},
		{"HostnameGeneratorMatch", `
type: MeshExternalService
name: httpbin
mesh: default
spec:
  match: [{type: HostnameGenerator, port: 443, protocol: TCP}]
  destination:
    type: Regular
    endpoints: [{address: httpbin.org, port: 443}]
    tls: {enabled: true, verification: {}, version: {}}
`, &Object{Kind: MeshExternalService, Name: "httpbin", Mesh: "default", Spec: &MeshExternalServiceSpec{
			Match: []ExternalMatch{{Type: MatchHostnameGenerator, Port: 443, Protocol: ProtocolTCP}},
			Destination: &ExternalDestination{Type: DestinationRegular, Endpoints: []ExternalEndpoint{{Address: "httpbin.org", Port: 443}},
				TLS: &ExternalTLS{Enabled: true}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeDefault(t, tt.doc)
			if errs := Validate(o); len(errs) > 0 {
				t.Fatalf("Validate: %v", errs)
			}
			if diff := cmp.Diff(tt.want, o); diff != "" {
				t.Errorf("object (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecode_KumaFlatAndSpecTogether(t *testing.T) {
	_, err := Decode([]byte("type: Zone\nname: east\nenabled: true\nspec: {enabled: false}\n"))
	if err == nil {
		t.Fatal("Decode accepted a Zone with both enabled and spec")
	}
	errs, _ := validate.From(err)
	checkViolations(t, errs, []v{{"spec", "must not be given together with top-level spec fields"}})
}

func TestMeshExternalService_HostnameGeneratorMatch(t *testing.T) {
	regular := "destination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n"
	runValidation(t, []validationCase{
		{"WithRegular", extsvc("match:\n- {type: HostnameGenerator, port: 443}\n" + regular), nil},
		{"WithExtension", extsvc("match:\n- {type: HostnameGenerator, port: 80}\ndestination:\n  type: Extension\n  extension: {type: Lambda}\n"), nil},
		{"ValueSet", extsvc("match:\n- {type: HostnameGenerator, value: a.com, port: 443}\n" + regular),
			[]v{{"spec.match[0].value", "must not be set for a HostnameGenerator match"}}},
		{"Passthrough", extsvc("match:\n- {type: HostnameGenerator, port: 443}\n"),
			[]v{{"spec.match[0].type", "a HostnameGenerator match needs destination.type Regular or Extension, got Passthrough"}}},
		{"PortInvalid", extsvc("match:\n- {type: HostnameGenerator, port: 0}\n" + regular), []v{{"spec.match[0].port", "got 0"}}},
	})
}
