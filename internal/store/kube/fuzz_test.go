package kube

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/resource"
)

// FuzzDecode reads arbitrary custom resources of every kind: no panic; an
// object read as valid is valid, and written and read again it is the same.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"kuma.io/v1alpha1","kind":"MeshService","metadata":{"name":"web","namespace":"shop","resourceVersion":"7","labels":{"kuma.io/mesh":"default"}},"spec":{"ports":[{"port":80,"targetPort":"http"}]},"status":{"vips":[{"ip":"10.96.0.1","type":"Kubernetes"}]}}`,
		`{"kind":"HostnameGenerator","metadata":{"name":"g","namespace":"meshnames-system","resourceVersion":"3"},"spec":{"template":"{{ .DisplayName }}.mesh","selector":{"meshService":{"matchLabels":{"a":"b"}}}}}`,
		`{"kind":"MeshExternalService","metadata":{"name":"x","namespace":"other","resourceVersion":"1"},"spec":{"match":[{"type":"Domain","value":"a.b","port":443}]}}`,
		`{"kind":"Mesh","metadata":{"name":"default","resourceVersion":"1"},"spec":{"mtls":{"enabled":true}}}`,
		`{"metadata":{"resourceVersion":"x"}}`,
		`{"metadata":{"name":"a.b","namespace":"meshnames-system","resourceVersion":"9","labels":{"kuma.io/origin":"global"}},"spec":null,"status":{"conditions":[{"type":"Valid","status":"False","message":"m"}]}}`,
	} {
		f.Add([]byte(s))
	}
	d := decoder{names: names{system: "meshnames-system"}, mode: resource.ModeZone, zone: "east"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, k := range crd.Kinds() {
			got, err := d.decode(k, raw)
			if err != nil || got.obj == nil {
				continue
			}
			if len(got.errs) > 0 {
				t.Fatalf("%s: an object with errors %v", k.Kind, got.errs)
			}
			// The change feed hands the decoded object out in place of the
			// stored copy read back (handOff): they are the same, but for
			// an empty map or list the stored JSON leaves out.
			plain, err := got.obj.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			var stored resource.Object
			if err := json.Unmarshal(plain, &stored); err != nil {
				t.Fatalf("%s: the stored copy does not read back: %v", k.Kind, err)
			}
			stored.Version = got.obj.Version
			if diff := cmp.Diff(&stored, got.obj, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("%s: the stored copy reads back otherwise (-stored +decoded):\n%s", k.Kind, diff)
			}
			ref, err := d.ref(got.obj.Key())
			if err != nil {
				t.Fatalf("%s %s: read, but its name does not map back: %v", k.Kind, got.obj.Key(), err)
			}
			if ref != got.ref {
				t.Fatalf("%s: name %s maps back to %v, read from %v", k.Kind, got.obj.Name, ref, got.ref)
			}
			body, err := d.encode(k, ref, got.obj)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			meta := doc["metadata"].(map[string]any)
			meta["resourceVersion"] = "5"
			again, _ := json.Marshal(doc)
			back, err := d.decode(k, again)
			if err != nil || back.obj == nil {
				t.Fatalf("%s: written and read again: %v %v", k.Kind, err, back.errs)
			}
			if diff := cmp.Diff(got.obj.Spec, back.obj.Spec, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("%s: spec changed in a round trip:\n%s", k.Kind, diff)
			}
			if diff := cmp.Diff(got.obj.Labels, back.obj.Labels); diff != "" {
				t.Fatalf("%s: labels changed in a round trip:\n%s", k.Kind, diff)
			}
		}
	})
}
