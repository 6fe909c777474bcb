package cache

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/s2dict"
	"github.com/meshnames/meshnames/internal/store"
)

// A frozen resource is compressed with S2 against a dictionary of
// typical resources. Resources of one kind differ in a few names and
// numbers, so a MeshService's 400 bytes of spec and status JSON shrink to
// about 50 against the dictionary, while on their own they would barely
// shrink at all. The encoding lives only in memory, so the dictionary may
// change between releases.

// dictSamples are typical resources of every kind; the most common kinds
// come last, where the encoder finds matches at the shortest offsets.
var dictSamples = []string{`type: HostnameGenerator
name: local-universal-mesh-service
spec:
  selector:
    meshService:
      matchLabels:
        kuma.io/origin: zone
  template: '{{ .DisplayName }}.svc.mesh.local'
`, `type: Dataplane
name: backend-01
mesh: default
spec:
  networking:
    address: 10.0.0.1
    inbound:
    - port: 8080
      tags:
        kuma.io/service: backend
        kuma.io/protocol: http
`, `type: MeshMultiZoneService
name: backend
mesh: default
spec:
  selector:
    meshService:
      matchLabels:
        kuma.io/display-name: backend
  ports:
  - name: http
    port: 80
    appProtocol: http
`, `type: MeshExternalService
name: httpbin
mesh: default
spec:
  match:
  - type: Domain
    value: httpbin.org
    port: 443
    protocol: tls
`, `type: MeshService
name: backend.default
mesh: default
labels:
  kuma.io/env: kubernetes
spec:
  selector:
    dataplaneLabels:
      matchLabels:
        app: backend
        k8s.kuma.io/namespace: default
  ports:
  - name: http
    port: 80
    targetPort: 8080
    appProtocol: http
  identities:
  - type: ServiceTag
    value: backend_default_svc_80
  export:
    mode: All
`, `type: MeshService
name: backend
mesh: default
spec:
  selector:
    dataplaneTags:
      kuma.io/service: backend
  ports:
  - name: http
    port: 80
    targetPort: 8080
    appProtocol: http
`}

// dictStatuses are the statuses the service samples get, by kind: what
// the controllers write for a named service with a VIP.
var dictStatuses = map[resource.Kind]resource.ServiceStatus{
	resource.MeshMultiZoneService: {
		Addresses: []resource.Address{{Hostname: "backend.mzsvc.mesh.local", Status: resource.AddressAvailable,
			Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "local-mesh-multi-zone-service"}}},
		VIPs: []resource.VIP{{IP: "243.0.0.1", Type: resource.VIPKuma}},
	},
	resource.MeshExternalService: {
		Addresses: []resource.Address{{Hostname: "httpbin.extsvc.mesh.local", Status: resource.AddressAvailable,
			Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "local-mesh-external-service"}}},
		VIPs: []resource.VIP{{IP: "242.0.0.1", Type: resource.VIPKuma}},
	},
	resource.MeshService: {
		Addresses: []resource.Address{{Hostname: "backend.svc.mesh.local", Status: resource.AddressAvailable,
			Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "local-universal-mesh-service"}}},
		VIPs: []resource.VIP{{IP: "241.0.0.1", Type: resource.VIPKuma}},
	},
}

// dictKubeStatus is the status of the sample of Kubernetes mode (label
// kuma.io/env: kubernetes), a MeshService made from a Service: its
// ClusterIP, its name and the names of its ServiceTag.
var dictKubeStatus = resource.ServiceStatus{
	Addresses: []resource.Address{
		{Hostname: "backend.default.svc.mesh.local", Status: resource.AddressAvailable,
			Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "local-kube-mesh-service"}},
		{Hostname: "backend_default_svc_80.mesh", Status: resource.AddressAvailable,
			Origin: resource.AddressOrigin{Kind: resource.OriginServiceTag, Name: "backend_default_svc_80"}},
		{Hostname: "backend-default-svc-80.mesh", Status: resource.AddressAvailable,
			Origin: resource.AddressOrigin{Kind: resource.OriginServiceTagAlias, Name: "backend_default_svc_80"}},
		{Hostname: "backend.default.svc.80.mesh", Status: resource.AddressAvailable,
			Origin: resource.AddressOrigin{Kind: resource.OriginServiceTagAlias, Name: "backend_default_svc_80"}},
	},
	VIPs: []resource.VIP{{IP: "10.96.0.1", Type: resource.VIPKubernetes}},
}

// dictionary returns the samples encoded as freezeObject encodes them.
func dictionary() ([]byte, error) {
	var dict []byte
	for _, doc := range dictSamples {
		o, err := resource.Decode([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("dictionary sample %q: %w", doc, err)
		}
		st, ok := dictStatuses[o.Kind]
		if o.Labels[resource.LabelEnv] == resource.EnvKubernetes {
			st, ok = dictKubeStatus, true
		}
		if ok {
			d, _ := resource.Lookup(o.Kind)
			status := d.NewStatus()
			*status.(resource.ServiceStatusOf).Service() = st
			o.Status = status
		}
		for _, part := range []any{o.Spec, o.Status} {
			if part == nil {
				continue
			}
			b, err := json.Marshal(part)
			if err != nil {
				return nil, err
			}
			dict = append(dict, b...)
		}
	}
	return dict, nil
}

// maxPlainBytes bounds what decompress accepts to decode: a frozen
// resource is at most a stored one's spec and status.
const maxPlainBytes = 8 * store.MaxObjectBytes

// frozenDict is the dictionary frozen resources are compressed against,
// made on first use: an empty control plane never pays for it.
//
// The compressor is S2 (Snappy's format with a dictionary and longer
// matches): a resource is a few hundred bytes that mostly repeat the
// dictionary, which matches alone capture. zstd spends most of its time
// building entropy tables for so little data: it freezes a typical
// MeshService in 7.1-7.7 us into 58 bytes, S2 in 1.6 us into 51, and S2
// reads it back in 0.1 us instead of 0.5 (BenchmarkFreeze, BenchmarkThaw).
var frozenDict = sync.OnceValue(func() *s2dict.Dict {
	dict, err := dictionary()
	if err != nil {
		panic(fmt.Sprintf("cache: %v", err)) // fixed data: TestDictionary fails first
	}
	// Matches start at the dictionary's last MeshService, the most common
	// resource, when the resource begins as a MeshService's spec does.
	d, err := s2dict.New(dict, []byte(`{"selector":{"dataplaneTags":{"kuma.io/service":"`), maxPlainBytes)
	if err != nil {
		panic(fmt.Sprintf("cache: %v", err))
	}
	return d
})

// compress returns head followed by src compressed, in an allocation of
// its exact size.
func compress(head, src []byte) []byte { return frozenDict().Encode(head, src) }

// decompress calls use with src decompressed; use must not keep the bytes.
func decompress(src []byte, use func([]byte) error) error { return frozenDict().Decode(src, use) }
