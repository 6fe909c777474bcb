package storetest

import (
	"fmt"

	"github.com/meshnames/meshnames/internal/resource"
)

const mesh = "default"

// meshService returns a MeshService with labels and a spec that exercises
// maps, slices and pointers.
func meshService(mesh, name string) *resource.Object {
	return &resource.Object{
		Kind:   resource.MeshService,
		Mesh:   mesh,
		Name:   name,
		Labels: map[string]string{"app": name, resource.LabelZone: "east"},
		Spec: &resource.MeshServiceSpec{
			Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{resource.TagService: name}},
			Ports: []resource.Port{
				{Name: "http", Port: 80, TargetPort: &resource.IntOrString{String: "web", IsName: true}, AppProtocol: resource.ProtocolHTTP},
				{Port: 9090, TargetPort: &resource.IntOrString{Int: 9091}, AppProtocol: resource.ProtocolTCP},
			},
			Identities: []resource.Identity{{Type: resource.IdentityServiceTag, Value: name}},
			State:      resource.StateAvailable,
		},
	}
}

func serviceStatus(hostname string) *resource.ServiceStatus {
	return &resource.ServiceStatus{
		Addresses: []resource.Address{{
			Hostname: hostname,
			Status:   resource.AddressAvailable,
			Origin:   resource.AddressOrigin{Kind: string(resource.HostnameGenerator), Name: "local"},
		}},
		VIPs:       []resource.VIP{{IP: "241.0.0.1", Type: resource.VIPKuma}},
		Conditions: []resource.Condition{{Type: "Ready", Status: resource.ConditionTrue, Reason: "Allocated"}},
	}
}

// sample returns an object of kind k with a non-trivial spec, and a status
// when the kind has one. Every kind must have a sample, so that a new kind
// is round-tripped through every backend.
func sample(k resource.Kind, name string) *resource.Object {
	enabled := false
	var o *resource.Object
	switch k {
	case resource.Mesh:
		o = &resource.Object{Spec: &resource.MeshSpec{}}
	case resource.Zone:
		o = &resource.Object{Spec: &resource.ZoneSpec{Enabled: &enabled}}
	case resource.Dataplane:
		o = &resource.Object{Mesh: mesh, Spec: &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{
			Address: "10.0.0.7",
			Inbound: []resource.Inbound{{Port: 8080, ServicePort: 80, Tags: map[string]string{resource.TagService: "web"}}},
		}}}
	case resource.MeshService:
		o = meshService(mesh, name)
		o.Status = serviceStatus(name + ".svc.mesh.local")
	case resource.MeshExternalService:
		inline := CACertPEM
		o = &resource.Object{Mesh: mesh,
			Spec: &resource.MeshExternalServiceSpec{
				Match: []resource.ExternalMatch{{Type: resource.MatchDomain, Value: "api.example.com", Port: 443, Protocol: resource.ProtocolTLS}},
				Destination: &resource.ExternalDestination{
					Type:      resource.DestinationRegular,
					Endpoints: []resource.ExternalEndpoint{{Address: "1.2.3.4", Port: 443}},
					TLS: &resource.ExternalTLS{Enabled: true, Version: &resource.TLSVersion{Min: resource.TLS12},
						Verification: &resource.TLSVerification{SubjectAltNames: []string{"api.example.com"}},
						CACert:       &resource.DataSource{InlineString: &inline}},
				},
			},
			Status: &resource.ServiceStatus{VIPs: []resource.VIP{{IP: "242.0.0.9", Type: resource.VIPKuma, Hostname: "api.example.com"}}},
		}
	case resource.MeshMultiZoneService:
		o = &resource.Object{Mesh: mesh,
			Spec: &resource.MeshMultiZoneServiceSpec{
				Selector: resource.MultiZoneSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				Ports:    []resource.Port{{Port: 80, AppProtocol: resource.ProtocolHTTP}},
			},
			Status: &resource.MultiZoneServiceStatus{
				ServiceStatus: resource.ServiceStatus{VIPs: []resource.VIP{{IP: "243.0.0.1", Type: resource.VIPKuma}}},
				Zones:         []resource.ZoneRef{{Name: "east"}, {Name: "west"}},
				MeshServices:  []resource.MeshServiceRef{{Name: "web", Zone: "east", Mesh: mesh}},
			},
		}
	case resource.HostnameGenerator:
		o = &resource.Object{Spec: &resource.HostnameGeneratorSpec{
			Template: "{{ .DisplayName }}.{{ .Mesh }}.mesh",
			Selector: resource.HostnameSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{resource.LabelOrigin: resource.OriginZone}}},
		}}
	case resource.ZoneIngress:
		o = &resource.Object{Labels: map[string]string{resource.LabelZone: "east", "kind": string(k)},
			Spec: &resource.ZoneIngressSpec{Networking: resource.ZoneIngressNetworking{
				Address: "192.168.0.1", Port: 10001, AdvertisedAddress: "ingress.east.example.com", AdvertisedPort: 443}}}
	default:
		panic(fmt.Sprintf("storetest: no sample for kind %s: add one", k))
	}
	o.Kind, o.Name = k, name
	if o.Labels == nil {
		o.Labels = map[string]string{"kind": string(k)}
	}
	return o
}

// CACertPEM is a CA certificate (test data, EC P-256, valid until 2126)
// for documents whose TLS data must parse, as validation wants.
const CACertPEM = `-----BEGIN CERTIFICATE-----
MIIBgDCCASegAwIBAgIUYJSDOZjISprH2l0IAxLU0X6+acMwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKZXhhbXBsZSBDQTAgFw0yNjEyMDQwNTQ5NTFaGA8yMTI2MTEx
MDA1NDk1MVowFTETMBEGA1UEAwwKZXhhbXBsZSBDQTBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABGvQp5ldPeQIXbwL0HnogbJWxLJFrelpkXi3czb6+yt5KhF3A2J0
aL5mqoNMBXS3uZ7gmdOdYIs2x/dPRXbEGOyjUzBRMB0GA1UdDgQWBBQJ2faZHsbx
E5P93CUj6NsRy/x2NDAfBgNVHSMEGDAWgBQJ2faZHsbxE5P93CUj6NsRy/x2NDAP
BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0cAMEQCIBrmrp06M4LGbN0My8Us
eUW4s5vqV8/+ds7sWUES15miAiBg3YBOu5WJN8dE2p2bR31WGJhSUcrJno8SFHLC
lqUP6A==
-----END CERTIFICATE-----
`
