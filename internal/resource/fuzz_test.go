package resource

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/validate"
)

// FuzzDecodeValidate feeds arbitrary bytes through the admission path:
// Decode, Default, Validate. Nothing may panic; every error is a list of
// violations that each name a field; and an accepted object must survive
// MarshalJSON and Decode unchanged, because that is how it is stored and
// read back, and the same must hold for EncodeYAML (`get -o yaml | apply`).
func FuzzDecodeValidate(f *testing.F) {
	for _, d := range validDocs {
		f.Add([]byte(d))
	}
	for _, d := range []string{
		// seed 000 and 001 generators.
		"type: HostnameGenerator\nname: k8s-zone-hostnames\nspec:\n  selector:\n    meshService:\n      labels:\n        kuma.io/zone: east\n" +
			"  template: '{{ label \"k8s.kuma.io/service-name\" }}.{{ label \"k8s.kuma.io/namespace\" }}.svc.mesh.{{ label \"kuma.io/zone\" }}'\n",
		"type: HostnameGenerator\nname: synced-mesh-multi-zone-service\nspec:\n  template: '{{ .DisplayName }}.mzsvc.mesh.local'\n  selector:\n    meshMultiZoneService: {}\n",
		"type: HostnameGenerator\nname: bad\nspec:\n  template: '{{ .Name }}..MESH'\n  selector: {}\n",
		// seed 003 external services.
		"type: MeshExternalService\nname: kafka\nmesh: default\nspec:\n  match:\n  - type: Domain\n    value: '*.eu-west-3.aws.cloud'\n    port: 9092\n    protocol: tls\n",
		"type: MeshExternalService\nname: mongo\nmesh: default\nspec:\n  match:\n  - {type: InternalVIP, value: mongo.ext.svc.local, port: 27017, protocol: tcp}\n" +
			"  destination:\n    type: Regular\n    endpoints:\n    - {address: 10.0.0.1, port: 27017}\n    - {address: 10.0.0.2, port: 27017}\n",
		"type: MeshExternalService\nname: bad\nmesh: default\nspec:\n  match:\n  - {type: CIDR, value: 10.1.1.5/24, port: 0, protocol: udp}\n" +
			"  destination:\n    type: Passthrough\n    endpoints: [{address: 'unix://x'}]\n    tls: {version: {min: TLSv1_3, max: TLSv1_0}}\n",
		// seed 002 and 004 services.
		"type: MeshService\nname: frontend\nmesh: default\nlabels:\n  kuma.io/managed-by: meshservice-generator\nspec:\n  selector:\n    dataplaneTags:\n      kuma.io/service: frontend_default_svc_80\n" +
			"  ports:\n  - {port: 80, targetPort: 8080, appProtocol: http}\n  identities:\n  - {type: ServiceTag, value: frontend_default_svc_80}\n",
		"type: MeshService\nname: Bad_Name\nmesh: default\nspec:\n  selector:\n    dataplaneTags: {a: b}\n    dataplaneRef: {name: x}\n  ports:\n  - {port: eighty}\n  bogus: true\n",
		"type: MeshMultiZoneService\nname: backend\nmesh: default\nspec:\n  selector:\n    meshService:\n      matchLabels: {kuma.io/display-name: backend}\n",
		`{"type":"Dataplane","name":"dp-1","mesh":"default","spec":{"networking":{"address":"0.0.0.0","inbound":[{"port":0,"tags":{}}]}}}`,
		"type: Zone\nname: east\nstatus: {anything: 1}\ncreationTime: 2024-01-01T00:00:00Z\nspec: {}\n",
		"- not\n- an object\n",
		"type: Unknown\n",
	} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := Decode(data)
		if err != nil {
			checkFuzzErrors(t, "Decode", err)
			return
		}
		o.Spec.Default()
		if errs := Validate(o); len(errs) > 0 {
			checkFuzzErrors(t, "Validate", errs)
			return
		}
		_ = Warnings(o)

		if diff := cmp.Diff(o, o.Clone()); diff != "" {
			t.Fatalf("Clone differs (-object +clone):\n%s", diff)
		}
		j, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("MarshalJSON of an accepted object: %v", err)
		}
		again, err := Decode(j)
		if err != nil {
			t.Fatalf("Decode of the re-encoded object: %v\nJSON: %s", err, j)
		}
		again.Spec.Default()
		if errs := Validate(again); len(errs) > 0 {
			t.Fatalf("re-encoded object is invalid: %v\nJSON: %s", errs, j)
		}
		if diff := cmp.Diff(o, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the object (-first +second):\n%s\nJSON: %s", diff, j)
		}

		// get -o yaml | apply must give the same object too.
		y, err := EncodeYAML(o)
		if err != nil {
			t.Fatalf("EncodeYAML of an accepted object: %v", err)
		}
		fromYAML, err := Decode(y)
		if err != nil {
			t.Fatalf("Decode of the YAML encoding: %v\nYAML:\n%s", err, y)
		}
		fromYAML.Spec.Default()
		if diff := cmp.Diff(o, fromYAML, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("YAML round trip changed the object (-first +second):\n%s\nYAML:\n%s", diff, y)
		}
	})
}

func checkFuzzErrors(t *testing.T, stage string, err error) {
	t.Helper()
	errs, ok := validate.From(err)
	if !ok {
		t.Fatalf("%s returned %T (%v), want validate.Errors", stage, err, err)
	}
	if len(errs) == 0 {
		t.Fatalf("%s returned an empty violation list as an error", stage)
	}
	for _, v := range errs {
		if v.Field == "" || v.Message == "" {
			t.Fatalf("%s: violation without a field or message: %+v", stage, v)
		}
	}
}

// FuzzUnmarshalLabels checks the plain path of UnmarshalLabels against
// encoding/json: whatever it decodes, encoding/json decodes the same.
func FuzzUnmarshalLabels(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"b"}`, `{"kuma.io/display-name":"redis","kuma.io/origin":"zone"}`,
		`{"a":"b","a":"c"}`, `{"a":"\u003c"}`, `{"a" :"b"}`, `{"a":"b",}`, `{"é":"ü"}`, "{\"a\":\"\xff\"}", `{"a":1}`, `null`} {
		f.Add([]byte(s), "redis")
	}
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		got, ok := plainLabels(data, name)
		if !ok {
			return
		}
		var want map[string]string
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("plainLabels decoded %q, which encoding/json refuses: %v", data, err)
		}
		if len(want) == 0 {
			want = nil
		}
		if !cmp.Equal(got, want) {
			t.Fatalf("plainLabels(%q) = %v, encoding/json %v", data, got, want)
		}
		if full, err := UnmarshalLabels(data, name); err != nil || !cmp.Equal(full, got) {
			t.Fatalf("UnmarshalLabels(%q) = %v, %v; want %v", data, full, err, got)
		}
	})
}

// FuzzPlainMeshServiceSpec checks the plain decoding of stored
// MeshService specs against encoding/json: whatever it decodes,
// encoding/json decodes the same; and the plain encoding: whatever spec
// encoding/json decodes, MarshalSpec writes as json.Marshal does.
func FuzzPlainMeshServiceSpec(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"selector":{"dataplaneTags":{"kuma.io/service":"redis"}},"ports":[{"name":"http","port":80,"targetPort":8080,"appProtocol":"http"}]}`,
		`{"selector":{"dataplaneRef":{"name":"dp-1"}},"ports":[{"port":6379,"targetPort":"redis"}],"state":"Available"}`,
		`{"identities":[{"type":"ServiceTag","value":"redis"}],"ports":[]}`, `{"selector":{}}`,
		`{"ports":[{"port":-0}]}`, `{"ports":[{"port":080}]}`, `{"ports":[{"port":8e1}]}`, `{"Ports":[]}`,
		`{"state":"a","state":"b"}`, `{"selector":{"dataplaneTags":{"a":"b","a":"c"}}}`, `{"ports":null}`,
		`{"export":{"mode":"All"}}`, `{"ports":[{"port":1234567890}]}`, "{\"state\":\"\xff\"}", `{"state":"\u00e9"}`,
		`{"selector":{"dataplaneTags":{}}}`, `{"selector":{"dataplaneTags":{"a<":"&b"},"dataplaneRef":{"name":"x"}}}`,
		`{"selector":{"dataplaneLabels":{"matchLabels":{"a":"b"}}}}`, `{"selector":{"dataplane":{"tags":{"a":"b"}}}}`,
		`{"ports":[{"port":1,"targetPort":"a\u2028"}],"identities":[{"type":"","value":""}],"export":{"mode":""}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want MeshServiceSpec
		jsonErr := json.Unmarshal(data, &want)
		if jsonErr == nil {
			enc, err := json.Marshal(&want)
			if got, err2 := MarshalSpec(&want); err != nil || err2 != nil || !bytes.Equal(got, enc) {
				t.Fatalf("MarshalSpec of %q's spec\n%s (%v)\nwant what json.Marshal writes\n%s (%v)", data, got, err2, enc, err)
			}
		}
		got, ok := plainMeshServiceSpec(data)
		if !ok {
			return
		}
		if jsonErr != nil {
			t.Fatalf("plainMeshServiceSpec decoded %q, which encoding/json refuses: %v", data, jsonErr)
		}
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Fatalf("plainMeshServiceSpec(%q) differs from encoding/json (-json +plain):\n%s", data, diff)
		}
	})
}

// FuzzPlainServiceStatus holds the plain status reader to encoding/json:
// whatever it accepts, encoding/json decodes to the same status; and
// MarshalStatus writes every status encoding/json decodes as json.Marshal
// does.
func FuzzPlainServiceStatus(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"addresses":[{"hostname":"redis.svc.mesh.local","status":"Available","origin":{"kind":"HostnameGenerator","name":"local"}}],"vips":[{"ip":"241.0.0.1","type":"Kuma"}]}`,
		`{"addresses":[{"hostname":"a","status":"NotAvailable","origin":{"kind":"HostnameGenerator","name":"g"},"reason":"taken"}],"conditions":[{"type":"VIPAllocated","status":"False","reason":"PoolExhausted","message":"no address"}]}`,
		`{"vips":[{"ip":"10.0.0.1","type":"Kuma","hostname":"ext.example.com"}],"addresses":[],"conditions":[]}`,
		`{"vips":null}`, `{"vips":[{"ip":"a","ip":"b"}]}`, `{"Addresses":[]}`, `{"addresses":[{"origin":{}}]}`,
		`{"addresses":[{"origin":{"kind":"a","kind":"b"}}]}`, `{"conditions":[{"type":1}]}`, "{\"vips\":[{\"ip\":\"\xff\"}]}",
		`{"addresses":[{"hostname":"é"}]}`, `{"vips":[{}]} `, `{"ports":[]}`,
		`{"addresses":[{"hostname":"a<b>","status":"&","origin":{"kind":"","name":"\u2028"},"reason":"\n"}],"vips":[{"ip":"","type":"","hostname":"h"}],"conditions":[{"type":"","status":"","reason":"r","message":"m"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want ServiceStatus
		jsonErr := json.Unmarshal(data, &want)
		if jsonErr == nil {
			enc, err := json.Marshal(&want)
			if got, err2 := MarshalStatus(&want); err != nil || err2 != nil || !bytes.Equal(got, enc) {
				t.Fatalf("MarshalStatus of %q's status\n%s (%v)\nwant what json.Marshal writes\n%s (%v)", data, got, err2, enc, err)
			}
		}
		got, ok := plainServiceStatus(data)
		if !ok {
			return
		}
		if jsonErr != nil {
			t.Fatalf("plainServiceStatus decoded %q, which encoding/json refuses: %v", data, jsonErr)
		}
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Fatalf("plainServiceStatus(%q) differs from encoding/json (-json +plain):\n%s", data, diff)
		}
	})
}

// FuzzPlainDocument holds the shortcut for plain request bodies
// (plainDocument) to the strict decoder: whatever it accepts, the strict
// decoder accepts without a problem and decodes to the same object.
func FuzzPlainDocument(f *testing.F) {
	for _, s := range []string{
		`{"type":"MeshService","mesh":"default","name":"redis","labels":{"team":"a"},"spec":{"selector":{"dataplaneTags":{"app":"redis"}},"ports":[{"port":6379,"targetPort":6379,"appProtocol":"tcp"}]}}`,
		`{"type":"MeshService","name":"redis","spec":{}}` + "\n", `{"type":"MeshService"}`, `{"type":"MeshService","labels":{}}`,
		`{"type":"MeshService","labels":{"a":"1","a":"2"}}`, `{"type":"MeshService","spec":null}`, `{"name":"x","type":"MeshService"}`,
		`{"type":"MeshService","mesh":"a","mesh":"b"}`, `{"type":"HostnameGenerator","name":"g","spec":{}}`, `{"type":"MeshService","status":{}}`,
		`{"type":"MeshService","labels":{"a":1}}`, `{"type":"MeshService","spec":{"ports":[{"port":"80"}]}}`, `{"type":"MeshService"} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := plainDocument(data)
		if !ok {
			return
		}
		want, errs := decodeStrict(data)
		if len(errs) > 0 {
			t.Fatalf("plainDocument decoded %q, which the strict decoder refuses: %v", data, errs)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("plainDocument(%q) differs from the strict decoder (-strict +plain):\n%s", data, diff)
		}
	})
}

// TestPlainDocument_TakesUsualBodies pins that the shortcut is taken for
// the bodies clients send (else FuzzPlainDocument would pass on a
// shortcut that never applies).
func TestPlainDocument_TakesUsualBodies(t *testing.T) {
	for _, body := range []string{
		// rest-load's (a Go map: keys sorted, type last)
		`{"labels":{"bench":"true","kuma.io/env":"universal","kuma.io/origin":"zone","ns":"ns-1"},"mesh":"default","name":"svc-1","spec":{"ports":[{"appProtocol":"http","name":"main","port":80,"targetPort":8080}]},"type":"MeshService"}`,
		// kumactl's and the README's (struct order), with a newline
		`{"type":"MeshService","mesh":"default","name":"redis","spec":{"selector":{"dataplaneTags":{"app":"redis"}},"ports":[{"port":6379,"targetPort":6379}]}}` + "\n",
	} {
		got, ok := plainDocument([]byte(body))
		if !ok {
			t.Errorf("plainDocument(%s) took the strict decoder", body)
			continue
		}
		want, errs := decodeStrict([]byte(body))
		if len(errs) > 0 || !cmp.Equal(want, got) {
			t.Errorf("plainDocument(%s) = %+v, want %+v (%v)", body, got, want, errs)
		}
	}
	// What zone sync sends of a MeshService: json.Marshal of its spec.
	spec := &MeshServiceSpec{Selector: MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": "redis"}},
		Ports:  []Port{{Name: "tcp", Port: 6379, TargetPort: &IntOrString{Int: 6379}, AppProtocol: "tcp"}},
		Export: &Export{Mode: "All"}}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := PlainSpec(MeshService, data); !ok || !cmp.Equal(got, Spec(spec)) {
		t.Errorf("PlainSpec(%s) = %+v, %v; want the spec", data, got, ok)
	}
}
