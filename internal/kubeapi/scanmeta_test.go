package kubeapi

import (
	"encoding/json"
	"testing"
)

// metaByUnmarshal is what MetaOf must agree with.
func metaByUnmarshal(raw []byte) (Meta, error) {
	var v struct {
		Metadata Meta `json:"metadata"`
	}
	err := json.Unmarshal(raw, &v)
	return v.Metadata, err
}

var metaCases = []struct {
	name, raw string
	scanned   bool // read by the scan, not left to json.Unmarshal
}{
	{"custom resource", `{"apiVersion":"kuma.io/v1alpha1","kind":"MeshService","metadata":{"annotations":{"resourceVersion":"1"},"creationTimestamp":"2026-01-01T00:00:00Z","generation":1,"labels":{"a":"b"},"managedFields":[{"fieldsV1":{"f:status":{".":{},"f:vips":{}}},"manager":"meshnames","operation":"Update","subresource":"status","time":"2026-01-01T00:00:00Z"}],"name":"web","namespace":"shop","resourceVersion":"12345","uid":"6a1c3e52-2f4b-4c8e-9d1a-000000000001"},"spec":{"ports":[{"port":80,"targetPort":-8.5e+3}]},"status":{"vips":[{"ip":"10.96.0.1"}],"x":[true,false,null,[],{}]}}`, true},
	{"built-in order", ` { "kind" : "Service" , "metadata" : { "name" : "a", "namespace":"b", "uid":"u", "resourceVersion":"7"} , "spec":{} } `, true},
	{"bookmark", `{"kind":"MeshService","apiVersion":"kuma.io/v1alpha1","metadata":{"resourceVersion":"99","annotations":{"k8s.io/initial-events-end":"true"}}}`, true},
	{"no metadata", `{"kind":"Status","code":410}`, true},
	{"null metadata", `{"metadata":null}`, true},
	{"empty", `{}`, true},
	{"duplicate metadata", `{"metadata":{"name":"a","resourceVersion":"1"},"metadata":{"resourceVersion":"2"}}`, true},
	{"duplicate field", `{"metadata":{"resourceVersion":"1","resourceVersion":"2"}}`, true},
	{"escaped value", `{"metadata":{"name":"a\u0062"}}`, false},
	{"folded key", `{"metadata":{"ResourceVersion":"5"}}`, false},
	{"folded metadata", `{"Metadata":{"name":"x"}}`, false},
	{"escaped key", `{"metadata":{"name":"x","namespace":"y","resourceVersion":"1"},"\u212a":1}`, false},
	{"non-ASCII key", "{\"metadata\":{\"nameſ\":\"x\",\"na\u017fme\":\"y\"}}", false},
	{"number value", `{"metadata":{"resourceVersion":5}}`, false},
	{"null value", `{"metadata":{"name":null}}`, false},
	{"not an object", `[1,2]`, false},
	{"metadata not an object", `{"metadata":[]}`, false},
	{"trailing data", `{"metadata":{"name":"a"}} x`, false},
	{"truncated", `{"metadata":{"name":"a"`, false},
	{"bad number", `{"x":01,"metadata":{"name":"a"}}`, false},
	{"bad escape", `{"x":"\q","metadata":{"name":"a"}}`, false},
	{"control character", "{\"x\":\"a\tb\",\"metadata\":{\"name\":\"a\"}}", false},
	{"missing comma", `{"x":1 "metadata":{"name":"a"}}`, false},
	{"null", `null`, false},
}

// MetaOf reads what json.Unmarshal reads, with the same errors, scanning
// the objects the API server sends and leaving the rest to json.Unmarshal.
func TestMetaOf(t *testing.T) {
	for _, c := range metaCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := MetaOf([]byte(c.raw))
			want, wantErr := metaByUnmarshal([]byte(c.raw))
			if got != want || (err == nil) != (wantErr == nil) {
				t.Errorf("MetaOf = %+v, %v; json.Unmarshal: %+v, %v", got, err, want, wantErr)
			}
			if _, ok := scanMeta([]byte(c.raw)); ok != c.scanned {
				t.Errorf("scanned: %v, want %v", ok, c.scanned)
			}
		})
	}
}

// FuzzMetaOf: MetaOf agrees with json.Unmarshal on every input.
func FuzzMetaOf(f *testing.F) {
	for _, c := range metaCases {
		f.Add([]byte(c.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := MetaOf(raw)
		want, wantErr := metaByUnmarshal(raw)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Fatalf("MetaOf(%q) = %+v, %v; json.Unmarshal: %+v, %v", raw, got, err, want, wantErr)
		}
	})
}

func BenchmarkMetaOf(b *testing.B) {
	raw := []byte(metaCases[0].raw)
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if _, err := MetaOf(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := metaByUnmarshal(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
