package kube

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/s2dict"
	"github.com/meshnames/meshnames/internal/store"
)

// The store keeps each object's JSON compressed against a dictionary of a
// typical object as this store encodes it (the labels the decoder
// computes, the spec, a named service's status): a MeshService made from a
// Service is about 1.4 KB of JSON and 175 bytes compressed
// (TestCompress_TypicalService), and the store holds one for every
// Service of the cluster.

// dictSample is a MeshService made from a Kubernetes Service as the store
// encodes it once the controllers have named it.
const dictSample = `{"type":"MeshService","mesh":"default","name":"backend.default","creationTime":"2026-01-01T00:00:00Z","modificationTime":"2026-01-01T00:00:00Z",` +
	`"labels":{"k8s.kuma.io/is-headless-service":"false","k8s.kuma.io/namespace":"default","k8s.kuma.io/service-name":"backend","kuma.io/display-name":"backend","kuma.io/env":"kubernetes","kuma.io/managed-by":"k8s-controller","kuma.io/mesh":"default","kuma.io/origin":"zone","kuma.io/zone":"east"},` +
	`"spec":{"selector":{"dataplaneLabels":{"matchLabels":{"app":"backend","k8s.kuma.io/namespace":"default"}}},"ports":[{"name":"http","port":80,"targetPort":8080,"appProtocol":"http"}],"identities":[{"type":"ServiceTag","value":"backend_default_svc_80"}],"export":{"mode":"All"}},` +
	`"status":{"addresses":[{"hostname":"backend.default.svc.mesh.local","status":"Available","origin":{"kind":"HostnameGenerator","name":"local-kube-mesh-service"}},` +
	`{"hostname":"backend_default_svc_80.mesh","status":"Available","origin":{"kind":"ServiceTag","name":"backend_default_svc_80"}},` +
	`{"hostname":"backend-default-svc-80.mesh","status":"Available","origin":{"kind":"ServiceTagAlias","name":"backend_default_svc_80"}},` +
	`{"hostname":"backend.default.svc.80.mesh","status":"Available","origin":{"kind":"ServiceTagAlias","name":"backend_default_svc_80"}}],` +
	`"vips":[{"ip":"10.96.0.1","type":"Kubernetes"}]}}`

// storedDict is the dictionary, made on first use.
var storedDict = sync.OnceValue(func() *s2dict.Dict {
	d, err := s2dict.New([]byte(dictSample), []byte(`{"type":"MeshService"`), 8*store.MaxObjectBytes)
	if err != nil {
		panic(fmt.Sprintf("kube store: %v", err)) // fixed data: the tests fail first
	}
	return d
})

// compressObject returns the stored form of an object's JSON.
func compressObject(plain []byte) []byte { return storedDict().Encode(nil, plain) }

// object decodes an entry.
func (e *entry) object() (*resource.Object, error) {
	var o resource.Object
	if err := storedDict().Decode(e.data, func(plain []byte) error { return json.Unmarshal(plain, &o) }); err != nil {
		return nil, fmt.Errorf("decode %s: %w", e.key, err)
	}
	o.Version, o.Revision = e.version, e.rev
	// The key's strings are the entry's: one copy for every reader.
	o.Kind, o.Mesh, o.Name = e.key.Kind, e.key.Mesh, e.key.Name
	return &o, nil
}

// json returns the JSON of an entry's object, which the caller owns.
func (e *entry) json() ([]byte, error) { return e.appendJSON(nil) }

// appendJSON appends the JSON of an entry's object to b.
func (e *entry) appendJSON(b []byte) ([]byte, error) {
	err := storedDict().Decode(e.data, func(plain []byte) error {
		b = append(b, plain...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", e.key, err)
	}
	return b, nil
}

// kept is a live entry as a store.Keeper hands it out: the fields it reads
// (key, version, revision, data) never change once the entry is made.
type kept entry

var _ store.Keeper = (*Store)(nil)

// Kept implements store.Keeper: the cache holds the entry itself for a
// resource it has not read for a while, rather than a second compressed
// copy of its own (about 170 bytes per Service).
func (s *Store) Kept(k resource.Key, rev int64) (store.Kept, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entry(k)
	if !ok || e.rev != rev {
		return nil, false
	}
	return (*kept)(e), true
}

func (k *kept) Object() (*resource.Object, error) { return (*entry)(k).object() }

func (k *kept) Revision() int64 { return k.rev }

func (k *kept) AppendJSON(b []byte) ([]byte, error) { return (*entry)(k).appendJSON(b) }
