package backend

import (
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// BenchmarkEncode_NamedMeshService encodes what creating a named
// MeshService writes (a zone stores every service it receives so).
func BenchmarkEncode_NamedMeshService(b *testing.B) {
	obj := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "redis-0042-5c8f2a7d9e1b3c4d",
		Labels: map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelZone: "east", resource.LabelDisplayName: "redis-0042", resource.LabelMesh: "default"},
		Spec: &resource.MeshServiceSpec{Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": "redis-0042"}},
			Ports: []resource.Port{{Port: 6379, AppProtocol: "tcp"}}},
		Status: &resource.ServiceStatus{
			Addresses: []resource.Address{{Hostname: "redis-0042.svc.east.mesh.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "synced-mesh-service"}}},
			VIPs:      []resource.VIP{{IP: "241.0.12.7", Type: resource.VIPKuma}},
		}}
	d := resource.MustLookup(resource.MeshService)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(obj, store.OpCreate, d); err != nil {
			b.Fatal(err)
		}
	}
}
