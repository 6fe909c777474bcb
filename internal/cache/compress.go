package cache

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// A frozen resource is compressed with zstd against a dictionary of
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

// dictionary returns the samples encoded as freezeObject encodes them.
func dictionary() ([]byte, error) {
	var dict []byte
	for _, doc := range dictSamples {
		o, err := resource.Decode([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("dictionary sample %q: %w", doc, err)
		}
		if st, ok := dictStatuses[o.Kind]; ok {
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

type codec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

// dictID tells the dictionary apart in a frame; any value but 0 will do.
const dictID = 1

// frozenCodec returns the compressor of frozen resources, made on first
// use: an empty control plane never pays for it.
var frozenCodec = sync.OnceValue(func() codec {
	dict, err := dictionary()
	if err != nil {
		panic(fmt.Sprintf("cache: %v", err)) // fixed data: TestDictionary fails first
	}
	// A window of 64 KiB holds the dictionary and a typical resource: a
	// larger one only costs memory (the default keeps 4 MiB of history).
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderDictRaw(dictID, dict), zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(1<<16))
	if err != nil {
		panic(fmt.Sprintf("cache: zstd encoder: %v", err))
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(dictID, dict), zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(8*store.MaxObjectBytes))
	if err != nil {
		panic(fmt.Sprintf("cache: zstd decoder: %v", err))
	}
	return codec{enc, dec}
})

// scratch are buffers for encoding and decoding, reused to spare the
// collector a buffer per freeze and per read.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// compress returns head followed by src compressed, in an allocation of
// its exact size.
func compress(head, src []byte) []byte {
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	*buf = frozenCodec().enc.EncodeAll(src, append((*buf)[:0], head...))
	return append([]byte(nil), *buf...)
}

// decompress calls use with src decompressed; use must not keep the bytes.
func decompress(src []byte, use func([]byte) error) error {
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	var err error
	if *buf, err = frozenCodec().dec.DecodeAll(src, (*buf)[:0]); err != nil {
		return err
	}
	return use(*buf)
}
