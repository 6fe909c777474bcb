package resource

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMeshExternalService_ClusterNames(t *testing.T) {
	tests := []struct {
		name  string
		match string
		want  []string
	}{
		// seed 003 "Cluster name": httpbin_80 and httpbin_443.
		{"SeedExample", "- {type: Domain, value: httpbin.com, port: 80, protocol: http2}\n- {type: Domain, value: httpbin.com, port: 443, protocol: tls}\n",
			[]string{"httpbin_80", "httpbin_443"}},
		{"OnePerPortInPortOrder", "- {type: IP, value: 1.1.1.1, port: 8080}\n- {type: IP, value: 1.1.1.2, port: 443, protocol: tls}\n- {type: CIDR, value: 10.0.0.0/8, port: 8080}\n",
			[]string{"httpbin_443", "httpbin_8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeDefault(t, extsvc("match:\n"+tt.match))
			if got := o.Spec.(*MeshExternalServiceSpec).ClusterNames(o.Name); !cmp.Equal(got, tt.want) {
				t.Errorf("ClusterNames = %q, want %q", got, tt.want)
			}
		})
	}
}

// document is the wire shape of every kind, as encoding/json would write
// it: the reference AppendJSON is held to.
type document struct {
	Type             string            `json:"type"`
	Mesh             string            `json:"mesh,omitempty"`
	Name             string            `json:"name"`
	CreationTime     *time.Time        `json:"creationTime,omitempty"`
	ModificationTime *time.Time        `json:"modificationTime,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	Spec             any               `json:"spec"`
	Status           any               `json:"status,omitempty"`
}

func referenceJSON(o *Object) ([]byte, error) {
	doc := document{Type: string(o.Kind), Mesh: o.Mesh, Name: o.Name, Labels: o.Labels, Spec: o.Spec}
	if doc.Spec == nil {
		doc.Spec = struct{}{}
	}
	if !o.CreationTime.IsZero() {
		t := o.CreationTime.UTC()
		doc.CreationTime = &t
	}
	if !o.ModificationTime.IsZero() {
		t := o.ModificationTime.UTC()
		doc.ModificationTime = &t
	}
	if o.Status != nil {
		doc.Status = o.Status
	}
	return json.Marshal(doc)
}

// TestAppendJSON_IsWhatJSONMarshalWrites pins the hand-written envelope of
// AppendJSON to what encoding/json writes for a document, and what the
// API relies on when it writes an object's MarshalJSON as it is
// (writeObject, list pages): the bytes are those json.Marshal writes for
// the object, HTML escaping included.
func TestAppendJSON_IsWhatJSONMarshalWrites(t *testing.T) {
	at := time.Date(2026, 11, 28, 9, 0, 0, 123, time.FixedZone("x", 3600))
	for _, o := range []*Object{
		{Kind: MeshService, Mesh: "default", Name: "redis"},
		{Kind: MeshService, Mesh: "default", Name: "a<b>&c", Labels: map[string]string{"z": "1", "a": "<&>", "é\"\n": "\u2028\x01"},
			Spec:         &MeshServiceSpec{Ports: []Port{{Name: "http", Port: 80, AppProtocol: "http"}}},
			CreationTime: at, ModificationTime: at.Add(time.Second),
			Status: &ServiceStatus{Addresses: []Address{{Hostname: "a<b>.svc", Status: "Available"}}, VIPs: []VIP{{IP: "241.0.0.1", Type: "Kuma"}}}},
		{Kind: HostnameGenerator, Name: "g", Labels: map[string]string{}, Spec: &HostnameGeneratorSpec{Template: "{{ .Name }}.<x>"}},
		{Kind: MeshService, Mesh: "m", Name: "typed-nil", Spec: (*MeshServiceSpec)(nil), Status: (*ServiceStatus)(nil)},
		{Kind: Mesh, Name: "bad\xffutf8", CreationTime: at},
	} {
		want, err := referenceJSON(o)
		if err != nil {
			t.Fatal(err)
		}
		if viaMarshal, err := json.Marshal(o); err != nil || !bytes.Equal(viaMarshal, want) {
			t.Errorf("%s: json.Marshal\n%s\nwant\n%s (%v)", o.Key(), viaMarshal, want, err)
		}
		got, err := o.AppendJSON([]byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%s: AppendJSON\n%s\nwant what json.Marshal writes\n%s", o.Key(), got, want)
		}
	}
}

// FuzzAppendJSON holds the envelope's strings (names, labels) and
// AppendLabels to encoding/json's escaping.
func FuzzAppendJSON(f *testing.F) {
	f.Add("default", "redis", "team", "<&>")
	f.Add("", "a\u2028b", "k\x00", "\xff")
	f.Fuzz(func(t *testing.T, mesh, name, key, value string) {
		o := &Object{Kind: MeshService, Mesh: mesh, Name: name, Labels: map[string]string{key: value, "z" + key: name}}
		want, err := referenceJSON(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := o.AppendJSON(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON\n%s (%v)\nwant\n%s", got, err, want)
		}
		// The store encodes labels alone the same way.
		if want, _ := json.Marshal(o.Labels); !bytes.Equal(AppendLabels(nil, o.Labels), want) {
			t.Fatalf("AppendLabels\n%s\nwant\n%s", AppendLabels(nil, o.Labels), want)
		}
	})
}

// BenchmarkUnmarshalLabels decodes the stored labels of a typical
// MeshService, as every start does for every resource.
func BenchmarkUnmarshalLabels(b *testing.B) {
	data := []byte(`{"kuma.io/display-name":"svc-00042","kuma.io/mesh":"default","kuma.io/origin":"zone","kuma.io/zone":"default","team":"payments"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UnmarshalLabels(data, "svc-00042"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestUnmarshalLabels_PlainAndEscaped(t *testing.T) {
	for _, tc := range []struct {
		data  string
		plain bool
		want  map[string]string
	}{
		{`{}`, true, nil},
		{`{"kuma.io/display-name":"redis","team":"a"}`, true, map[string]string{LabelDisplayName: "redis", "team": "a"}},
		{`{"a":"b","a":"c"}`, true, map[string]string{"a": "c"}},
		{`{"a":"\u003cb\u003e"}`, false, map[string]string{"a": "<b>"}},
		{`{ "a": "b" }`, false, map[string]string{"a": "b"}},
		{"{\"a\":\"\xff\"}", false, map[string]string{"a": "\ufffd"}},
	} {
		_, plain := plainLabels([]byte(tc.data), "redis")
		got, err := UnmarshalLabels([]byte(tc.data), "redis")
		if plain != tc.plain || err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("%s: plain %v, %v, %v; want plain %v, %v", tc.data, plain, got, err, tc.plain, tc.want)
		}
	}
	for _, bad := range []string{`{"a":1}`, `{"a":"b",}`, `null`, ``, `{"a":"b"`} {
		if got, err := UnmarshalLabels([]byte(bad), "redis"); err == nil && bad != `null` {
			t.Errorf("%s: decoded %v, want an error", bad, got)
		}
	}
}

func TestIntOrString_UnmarshalJSON(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    IntOrString
		wantErr bool
	}{
		{`8080`, IntOrString{Int: 8080}, false},
		{`-1`, IntOrString{Int: -1}, false},
		{`"http"`, IntOrString{String: "http", IsName: true}, false},
		{`"8080"`, IntOrString{String: "8080", IsName: true}, false},
		{`null`, IntOrString{IsName: true}, false},
		{`80.5`, IntOrString{}, true},
		{`true`, IntOrString{}, true},
		{`{}`, IntOrString{}, true},
	} {
		var got IntOrString
		err := got.UnmarshalJSON([]byte(tc.in))
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("%s: %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// BenchmarkUnmarshalSpec_MeshService decodes a typical stored MeshService
// spec, as every start does for every one.
func BenchmarkUnmarshalSpec_MeshService(b *testing.B) {
	data, err := json.Marshal(&MeshServiceSpec{
		Selector: MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": "svc-00042"}},
		Ports:    []Port{{Name: "http", Port: 80, TargetPort: &IntOrString{Int: 8080}, AppProtocol: "http"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UnmarshalSpec(MeshService, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalSpec_MeshService encodes a typical MeshService spec, as
// every write does (json: encoding/json, the way before MarshalSpec).
func BenchmarkMarshalSpec_MeshService(b *testing.B) {
	benchMarshal(b, Spec(&MeshServiceSpec{
		Selector: MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": "svc-00042"}},
		Ports:    []Port{{Name: "http", Port: 80, TargetPort: &IntOrString{Int: 8080}, AppProtocol: "http"}},
	}), MarshalSpec)
}

// BenchmarkMarshalStatus_Service encodes a named service's status, as
// every status write does.
func BenchmarkMarshalStatus_Service(b *testing.B) {
	benchMarshal(b, Status(&ServiceStatus{
		Addresses: []Address{{Hostname: "svc-00042.ns-42.svc.mesh.local", Status: "Available", Origin: AddressOrigin{Kind: "HostnameGenerator", Name: "local"}}},
		VIPs:      []VIP{{IP: "241.0.0.43", Type: "Kuma"}},
	}), MarshalStatus)
}

// benchMarshal runs plain (the hand-written encoding) and json.Marshal
// over v, as sub-benchmarks.
func benchMarshal[T any](b *testing.B, v T, plain func(T) ([]byte, error)) {
	for _, enc := range []struct {
		name string
		f    func(T) ([]byte, error)
	}{{"plain", plain}, {"json", func(v T) ([]byte, error) { return json.Marshal(v) }}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.f(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidate_SyncedMeshService validates a MeshService as a zone
// admits every one it receives.
func BenchmarkValidate_SyncedMeshService(b *testing.B) {
	obj := &Object{Kind: MeshService, Mesh: "default", Name: "redis-0042-5c8f2a7d9e1b3c4d",
		Labels: map[string]string{LabelOrigin: OriginGlobal, LabelZone: "east", LabelDisplayName: "redis-0042", LabelMesh: "default"},
		Spec: &MeshServiceSpec{Selector: MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": "redis-0042"}},
			Ports: []Port{{Port: 6379, AppProtocol: "tcp"}}}}
	obj.Spec.Default()
	b.ReportAllocs()
	for b.Loop() {
		if errs := Validate(obj); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
