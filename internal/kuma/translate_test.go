package kuma

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/meshnames/meshnames/internal/decode"
	"github.com/meshnames/meshnames/internal/resource"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/tokuma and testdata/fromkuma")

// nativeObject reads a native document as the store holds it (status and
// times included) and applies defaults, as every stored spec has had.
func nativeObject(t testing.TB, text []byte) *resource.Object {
	t.Helper()
	g, err := decode.YAMLGeneric(text)
	if err != nil {
		t.Fatalf("native document: %v", err)
	}
	j, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var o resource.Object
	if err := json.Unmarshal(j, &o); err != nil {
		t.Fatalf("native document: %v", err)
	}
	o.Spec.Default()
	if errs := resource.Validate(&o); len(errs) > 0 {
		t.Fatalf("native document is not valid: %v", errs)
	}
	return &o
}

func indent(t testing.TB, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// stored is what a write stores of o: the fields FromKuma carries, as the
// store encodes them.
func stored(t testing.TB, o *resource.Object) string {
	t.Helper()
	b, err := json.Marshal(&resource.Object{Kind: o.Kind, Mesh: o.Mesh, Name: o.Name, Labels: o.Labels, Spec: o.Spec})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// roundTrip sends o's Kuma document back through FromKuma and Default.
func roundTrip(t testing.TB, o *resource.Object) (*resource.Object, error) {
	t.Helper()
	doc, err := json.Marshal(ToKuma(o))
	if err != nil {
		t.Fatal(err)
	}
	back, errs := FromKuma(o.Kind, doc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("FromKuma of %s: %v", doc, errs)
	}
	back.Spec.Default()
	return back, nil
}

// golden runs fn on the input section of every testdata/<dir>/*.txtar and
// compares its output with the file's out section.
func golden(t *testing.T, dir, in, out string, fn func(t *testing.T, input []byte) string) {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var input, want []byte
			for _, f := range ar.Files {
				switch f.Name {
				case in:
					input = f.Data
				case out:
					want = f.Data
				}
			}
			got := fn(t, input)
			if *update {
				ar.Files = []txtar.File{{Name: in, Data: input}, {Name: out, Data: []byte(got)}}
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want +got), run with -update if intended:\n%s", out, diff)
			}
		})
	}
}

// TestToKuma_Golden renders each native document of testdata/tokuma as its
// Kuma document. A document the Kuma shape carries whole must come back
// unchanged through FromKuma; one it does not must list what it leaves out.
func TestToKuma_Golden(t *testing.T) {
	golden(t, "tokuma", "native.yaml", "kuma.json", func(t *testing.T, input []byte) string {
		o := nativeObject(t, input)
		if len(Omitted(o)) == 0 {
			back, err := roundTrip(t, o)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(stored(t, o), stored(t, back)); d != "" {
				t.Errorf("native -> Kuma -> native changed what is stored (-before +after):\n%s", d)
			}
		}
		return indent(t, ToKuma(o))
	})
}

// TestFromKuma_Golden translates each Kuma document of testdata/fromkuma
// (the kind is its type) and shows the native document a write stores, after
// defaults, with the native rules it breaks at their Kuma paths; or the
// translation's own refusals.
func TestFromKuma_Golden(t *testing.T) {
	golden(t, "fromkuma", "kuma.yaml", "native", func(t *testing.T, input []byte) string {
		g, err := decode.YAMLGeneric(input)
		if err != nil {
			t.Fatal(err)
		}
		kind, _ := g.(map[string]any)["type"].(string)
		o, errs := FromKuma(resource.Kind(kind), input)
		var b strings.Builder
		if len(errs) > 0 {
			b.WriteString("refused:\n")
			for _, e := range errs {
				fmt.Fprintf(&b, "%s: %s\n", e.Field, e.Message)
			}
			return b.String()
		}
		o.Spec.Default()
		b.WriteString(indent(t, o))
		if verrs := resource.Validate(o); len(verrs) > 0 {
			b.WriteString("native violations, at their Kuma paths:\n")
			for _, e := range verrs {
				fmt.Fprintf(&b, "%s: %s\n", KumaPath(o.Kind, e.Field), e.Message)
			}
		}
		return b.String()
	})
}

func TestKumaPath(t *testing.T) {
	tests := []struct {
		kind         resource.Kind
		native, want string
	}{
		{resource.Dataplane, "spec.networking.inbound[0].port", "networking.inbound[0].port"},
		{resource.Dataplane, "spec.networking", "networking"},
		{resource.Zone, "spec.enabled", "enabled"},
		{resource.MeshExternalService, "spec.match[0].port", "spec.match.port"},
		{resource.MeshExternalService, "spec.destination.endpoints[2].address", "spec.endpoints[2].address"},
		{resource.MeshExternalService, "spec.destination.tls.caCert.secret", "spec.tls.verification.caCert.secretRef.name"},
		{resource.MeshExternalService, "spec.destination.tls.clientKey", "spec.tls.verification.clientKey"},
		{resource.MeshExternalService, "spec.destination.tls.version.min", "spec.tls.version.min"},
		{resource.MeshExternalService, "spec.destination.tls.verification.skip", "spec.tls.verification.mode"},
		{resource.MeshExternalService, "spec.destination.type", "spec.type"},
		{resource.MeshExternalService, "spec.destinationx", "spec.destinationx"},
		{resource.MeshService, "spec.ports[0].port", "spec.ports[0].port"},
		{resource.MeshService, "labels", "labels"},
	}
	for _, tt := range tests {
		if got := KumaPath(tt.kind, tt.native); got != tt.want {
			t.Errorf("KumaPath(%s, %q) = %q, want %q", tt.kind, tt.native, got, tt.want)
		}
	}
}

// The identifiers Kuma computes, checked against the examples of Kuma's
// reference: kri_msvc_default_zone-1__redis-zone-1_ and SNIs with and
// without a zone.
func TestKRIAndSNIs(t *testing.T) {
	ms := func(labels map[string]string, ports ...resource.Port) *resource.Object {
		return &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "redis-zone-1-2v6wfvvcvbc9f55d", Labels: labels,
			Spec: &resource.MeshServiceSpec{Ports: ports}}
	}
	synced := ms(map[string]string{resource.LabelZone: "zone-1", resource.LabelDisplayName: "redis-zone-1"},
		resource.Port{Port: 6739}, resource.Port{Port: 80, Name: "http"}, resource.Port{Port: 81, Name: "Bad_Name"})
	if got, want := KRI(synced), "kri_msvc_default_zone-1__redis-zone-1_"; got != want {
		t.Errorf("KRI = %q, want %q", got, want)
	}
	wantSNIs := []SNI{{6739, "sni.msvc.default.zone-1.redis-zone-1.6739"}, {80, "sni.msvc.default.zone-1.redis-zone-1.http"}}
	if d := cmp.Diff(wantSNIs, SNIs(synced)); d != "" {
		t.Errorf("SNIs (-want +got):\n%s", d)
	}
	local := ms(nil, resource.Port{Port: 1, Name: "some-port"})
	local.Name = "redis-zone-1"
	if d := cmp.Diff([]SNI{{1, "sni.msvc.default.redis-zone-1.some-port"}}, SNIs(local)); d != "" {
		t.Errorf("SNIs without a zone (-want +got):\n%s", d)
	}
	if got := KRI(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}); got != "kri_m____default_" {
		t.Errorf("Mesh KRI = %q", got)
	}
	if got := KRI(&resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{}}); got != "" {
		t.Errorf("Zone KRI = %q, want none", got)
	}
}

// FromKuma ignores what the server computes, so that a document read can be
// sent back; and refuses a document of another kind than its path's.
func TestFromKuma_ReadOnlyAndKind(t *testing.T) {
	doc := []byte(`{"type":"Zone","name":"east","enabled":false,"creationTime":"2026-01-01T00:00:00Z","kri":"x","snis":[],"status":{},"meshnames":{"omitted":[]}}`)
	o, errs := FromKuma(resource.Zone, doc)
	if len(errs) > 0 {
		t.Fatalf("FromKuma: %v", errs)
	}
	if o.Spec.(*resource.ZoneSpec).Enabled == nil || *o.Spec.(*resource.ZoneSpec).Enabled || !o.CreationTime.IsZero() {
		t.Errorf("FromKuma = %+v; want enabled false and no creation time", o)
	}
	if _, errs := FromKuma(resource.Mesh, doc); len(errs) != 1 || errs[0].Field != "type" {
		t.Errorf("Zone document on a Mesh path: %v, want one violation of type", errs)
	}
	for _, bad := range [][]byte{[]byte("[1]"), []byte("{"), []byte("a: [")} {
		if _, errs := FromKuma(resource.Zone, bad); len(errs) != 1 || errs[0].Field != resource.DocumentField {
			t.Errorf("FromKuma(%q) = %v, want one document violation", bad, errs)
		}
	}
}
