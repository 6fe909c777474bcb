package kubeservices

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	yaml "go.yaml.in/yaml/v2"
	"golang.org/x/tools/txtar"

	"github.com/meshnames/meshnames/internal/decode"
	"github.com/meshnames/meshnames/internal/resource"
)

var update = flag.Bool("update", false, "rewrite the want sections of the golden files")

// TestTranslate_Golden runs each testdata/translate/*.txtar: Kubernetes
// manifests in (a Service; its Namespace, EndpointSlices and Pods when
// they matter; the meshes that exist), the MeshServices out.
func TestTranslate_Golden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "translate", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in := Input{ExportDefault: resource.ExportAll, SystemNamespace: "meshnames-system"}
			meshes := []string{"default"}
			var slicesRaw, podsRaw [][]byte
			wantIdx := -1
			exported := false // a ServiceExport of the Service exists
			for i, f := range ar.Files {
				switch f.Name {
				case "meshes":
					meshes = strings.Fields(string(f.Data))
				case "exportDefault":
					in.ExportDefault = strings.TrimSpace(string(f.Data))
				case "serviceexport":
					exported = true
				case "service.yaml":
					svc, err := DecodeService(toJSON(t, f.Data))
					if err != nil {
						t.Fatal(err)
					}
					in.Service = svc
				case "namespace.yaml":
					ns, err := DecodeNamespace(toJSON(t, f.Data))
					if err != nil {
						t.Fatal(err)
					}
					in.Namespace = &ns
				case "endpointslices.yaml":
					for _, d := range resource.SplitYAML(f.Data) {
						slicesRaw = append(slicesRaw, toJSON(t, d.Data))
					}
				case "pods.yaml":
					for _, d := range resource.SplitYAML(f.Data) {
						podsRaw = append(podsRaw, toJSON(t, d.Data))
					}
				case "want.yaml":
					wantIdx = i
				default:
					t.Fatalf("unknown section %q", f.Name)
				}
			}
			in.Service.Exported = exported
			in.MeshExists = func(m string) bool { return slices.Contains(meshes, m) }
			pods := map[string]*Pod{}
			for _, raw := range podsRaw {
				p, _, err := decodePod(raw)
				if err != nil {
					t.Fatal(err)
				}
				pods[p.Namespace+"/"+p.Name] = p
			}
			for _, raw := range slicesRaw {
				_, s, err := decodeSlice(raw)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range s.endpoints {
					ep := Endpoint{Addresses: e.addresses}
					if e.pod.name != "" {
						ep.Pod = pods[e.pod.namespace+"/"+e.pod.name]
						if ep.Pod == nil {
							ep.Pod = &Pod{Namespace: e.pod.namespace, Name: e.pod.name}
						}
					}
					in.Endpoints = append(in.Endpoints, ep)
				}
			}
			got := render(t, Translate(in))
			if wantIdx < 0 {
				ar.Files = append(ar.Files, txtar.File{Name: "want.yaml"})
				wantIdx = len(ar.Files) - 1
			}
			if *update {
				ar.Files[wantIdx].Data = got
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if d := cmp.Diff(string(ar.Files[wantIdx].Data), string(got)); d != "" {
				t.Errorf("translation (-want +got):\n%s", d)
			}
		})
	}
}

func toJSON(t *testing.T, data []byte) []byte {
	t.Helper()
	g, err := decode.YAMLGeneric(data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// render writes an Output as YAML: the mesh, why nothing, the problems and
// each MeshService as a document.
func render(t *testing.T, out Output) []byte {
	t.Helper()
	var b bytes.Buffer
	head := yaml.MapSlice{{Key: "mesh", Value: out.Mesh}}
	if out.Skipped != "" {
		head = append(head, yaml.MapItem{Key: "skipped", Value: out.Skipped})
	}
	if len(out.Problems) > 0 {
		head = append(head, yaml.MapItem{Key: "problems", Value: out.Problems})
	}
	h, err := yaml.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(h)
	for _, o := range out.Services {
		doc, err := resource.EncodeYAML(o)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(doc)
	}
	return b.Bytes()
}

// TestTranslate_Deterministic: the same input gives the same output, so a
// resync writes nothing.
func TestTranslate_Deterministic(t *testing.T) {
	in := Input{
		Service: Service{Namespace: "shop", Name: "web", Labels: map[string]string{"b": "2", "a": "1", resource.LabelMesh: "default"},
			ClusterIPs: []string{"10.96.0.10", "fd00::10"}, Selector: map[string]string{"app": "web"},
			Ports: []ServicePort{{Port: 80, Name: "http", AppProtocol: "http"}, {Port: 53, Protocol: "UDP"}, {Port: 9090}}},
		MeshExists: func(string) bool { return true }, ExportDefault: resource.ExportAll,
	}
	first := Translate(in)
	for range 20 {
		if d := cmp.Diff(first, Translate(in), cmp.Comparer(func(a, b *resource.Object) bool { return cmp.Equal(*a, *b) })); d != "" {
			t.Fatalf("translations differ:\n%s", d)
		}
	}
}
