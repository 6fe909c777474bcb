package xds

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"golang.org/x/tools/txtar"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	// The typed configs inside the resources, for Validate and protojson.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/dns_filter/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/meshnames/meshnames/internal/resource"
)

var update = flag.Bool("update", false, "rewrite the golden files with what the code renders")

// renderCase is the input section of a testdata/render file.
type renderCase struct {
	Kind      string            `yaml:"kind"`
	Name      string            `yaml:"name"`
	Labels    map[string]string `yaml:"labels"`
	Ports     []Port            `yaml:"ports"`
	VIPs      []string          `yaml:"vips"`
	Hostnames []string          `yaml:"hostnames"`
	// Endpoints: port -> "ip:port zone priority [sni]"
	Endpoints   map[int][]string `yaml:"endpoints"`
	NoEndpoints string           `yaml:"noEndpoints"`
	// External is a MeshExternalService's spec, as the API takes it, and
	// NamedVIPs the VIPs of its InternalVIP values.
	External  map[string]any      `yaml:"external"`
	NamedVIPs map[string][]string `yaml:"namedVIPs"`
}

func (c renderCase) service(t *testing.T) *Service {
	s := &Service{
		Key:    resource.Key{Kind: resource.Kind(c.Kind), Mesh: "default", Name: c.Name},
		Labels: c.Labels, Ports: c.Ports, Hostnames: c.Hostnames, Endpoints: map[int][]Endpoint{}, NoEndpoints: c.NoEndpoints,
	}
	for _, v := range c.VIPs {
		s.VIPs = append(s.VIPs, netip.MustParseAddr(v))
	}
	if c.External != nil {
		s.External = &External{Spec: externalSpec(t, c.External), NamedVIPs: map[string][]netip.Addr{}}
		for h, vs := range c.NamedVIPs {
			for _, v := range vs {
				s.External.NamedVIPs[h] = append(s.External.NamedVIPs[h], netip.MustParseAddr(v))
			}
		}
	}
	for port, eps := range c.Endpoints {
		for _, e := range eps {
			var addr, zone, sni string
			var prio uint32
			f := strings.Fields(e)
			if len(f) == 4 {
				sni = f[3]
				e = strings.Join(f[:3], " ")
			}
			if _, err := fmt.Sscanf(e, "%s %s %d", &addr, &zone, &prio); err != nil {
				t.Fatalf("endpoint %q: want \"ip:port zone priority [sni]\": %v", e, err)
			}
			s.Endpoints[port] = append(s.Endpoints[port], Endpoint{Addr: netip.MustParseAddrPort(addr), Zone: zone, Priority: prio, SNI: sni})
		}
	}
	return s
}

// TestRender_Golden renders each testdata/render/*.txtar's service and
// compares every resource, as indented protojson, with the file's
// sections (one per resource, named TYPE NAME). Every resource, and
// every typed config inside it, must pass its Validate. -update rewrites
// the sections.
func TestRender_Golden(t *testing.T) {
	goldenRender(t, "testdata/render", "service.yaml", func(t *testing.T, input []byte) []Resource {
		var c renderCase
		decodeStrict(t, "service.yaml", input, &c)
		return Render(c.service(t))
	})
}

// goldenRender runs render on the first section (named input) of each
// txtar file of dir and compares what it renders with the other
// sections: a resource per section, named TYPE NAME, its proxyless shape
// next to it; a resource's note, and the notes of the service, in
// sections of their own.
func goldenRender(t *testing.T, dir, input string, render func(*testing.T, []byte) []Resource) {
	files, err := filepath.Glob(dir + "/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if len(ar.Files) == 0 || ar.Files[0].Name != input {
				t.Fatalf("the first section must be %s", input)
			}
			got := []txtar.File{ar.Files[0]}
			var notes []byte
			for _, r := range render(t, ar.Files[0].Data) {
				if r.Msg == nil {
					notes = append(notes, r.Note+"\n"...)
					continue
				}
				validateDeep(t, r.Name, r.Msg)
				got = append(got, txtar.File{Name: r.Type.String() + " " + r.Name, Data: indentJSON(t, r.Msg)})
				if r.Proxyless != nil {
					validateDeep(t, r.Name+" (proxyless)", r.Proxyless)
					got = append(got, txtar.File{Name: r.Type.String() + " " + r.Name + " (proxyless)", Data: indentJSON(t, r.Proxyless)})
				}
				if r.Note != "" {
					got = append(got, txtar.File{Name: "note " + r.Name, Data: []byte(r.Note + "\n")})
				}
			}
			if notes != nil {
				got = append(got, txtar.File{Name: "notes", Data: notes})
			}
			if *update {
				ar.Files = got
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if d := cmp.Diff(sections(ar.Files), sections(got)); d != "" {
				t.Errorf("rendered resources differ (-golden +got); run with -update if intended:\n%s", d)
			}
		})
	}
}

func decodeStrict(t *testing.T, name string, data []byte, v any) {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func sections(fs []txtar.File) map[string]string {
	m := map[string]string{}
	for _, f := range fs {
		m[f.Name] = string(f.Data)
	}
	return m
}

// indentJSON is m as protojson, indented by encoding/json (protojson's
// own whitespace is deliberately unstable).
func indentJSON(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// validateDeep runs ValidateAll on m and on every Any inside it, which
// generated validation does not open.
func validateDeep(t *testing.T, name string, m proto.Message) {
	t.Helper()
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			t.Errorf("%s: %T does not validate: %v", name, m, err)
		}
	} else {
		t.Errorf("%s: %T has no ValidateAll", name, m)
	}
	forEachAny(m, func(a *anypb.Any) {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Errorf("%s: %s: %v", name, a.GetTypeUrl(), err)
			return
		}
		validateDeep(t, name+" "+a.GetTypeUrl(), inner)
	})
}

// forEachAny calls fn with every Any directly or deeply inside m (not
// inside another Any: validateDeep recurses into those).
func forEachAny(m proto.Message, fn func(*anypb.Any)) {
	var walk func(protoreflect.Message)
	walk = func(rm protoreflect.Message) {
		rm.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsMap():
				if fd.MapValue().Message() != nil {
					v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
						visit(mv.Message(), walk, fn)
						return true
					})
				}
			case fd.Message() == nil:
			case fd.IsList():
				for i := range v.List().Len() {
					visit(v.List().Get(i).Message(), walk, fn)
				}
			default:
				visit(v.Message(), walk, fn)
			}
			return true
		})
	}
	walk(m.ProtoReflect())
}

func visit(m protoreflect.Message, walk func(protoreflect.Message), fn func(*anypb.Any)) {
	if a, ok := m.Interface().(*anypb.Any); ok {
		fn(a)
		return
	}
	walk(m)
}
