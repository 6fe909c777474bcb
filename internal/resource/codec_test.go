package resource

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/meshnames/meshnames/internal/validate"
)

// This file tests Decode (errors, read-only fields, JSON, the seeds'
// aliases, Kuma's flat shape, round trips) and Object.Clone.

func TestDecode_Errors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []v
	}{
		{"UnknownTopLevelField", msvc("{}") + "bogus: 1\n", []v{{"bogus", "unknown field"}}},
		{"UnknownNestedField", msvc("ports:\n- port: 80\n  bogus: true\n"), []v{{"spec.ports[0].bogus", "unknown field"}}},
		{"UnknownSeedOnlyField", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 80}\ndestination:\n  destinations: []\n"), []v{{"spec.destination.destinations", "unknown field"}}},
		{"FieldNamesAreCaseSensitive", msvc("Ports: []\n"), []v{{"spec.Ports", "unknown field"}}},
		{"PortIsAString", msvc("ports:\n- port: eighty\n"), []v{{"spec.ports[0].port", `must be an integer, got string "eighty"`}}},
		{"PortIsAFraction", msvc("ports:\n- port: 80.5\n"), []v{{"spec.ports[0].port", "must be an integer"}}},
		{"TargetPortIsABool", msvc("ports:\n- port: 80\n  targetPort: true\n"), []v{{"spec.ports[0].targetPort", "must be a port number or a port name"}}},
		{"LabelsIsAList", "type: Zone\nname: z\nlabels: [a]\nspec: {}\n", []v{{"labels", "must be an object"}}},
		{"SpecIsAString", "type: Zone\nname: z\nspec: x\n", []v{{"spec", "must be an object"}}},
		{"SeedInlineNumber", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  tls:\n    caCert:\n      inline: 123\n"), []v{{"spec.destination.tls.caCert.inline", "must be a string, got number 123"}}},
		{"EveryProblemAtOnce", msvc("ports:\n- port: eighty\n  bogus: 1\n") + "extra: x\n", []v{{"extra", ""}, {"spec.ports[0].bogus", ""}, {"spec.ports[0].port", ""}}},
		// A port name is a DNS-1123 label; an empty one is not a port left
		// unnamed (leave the name out for that), for every kind with ports.
		{"PortNameEmpty", msvc("ports:\n- port: 80\n  name: ''\n"), []v{{"spec.ports[0].name", "must not be empty"}}},
		{"MultiZonePortNameEmpty", mzsvc("selector: {meshService: {matchLabels: {app: a}}}\nports:\n- port: 80\n  name: \"\"\n"), []v{{"spec.ports[0].name", "must not be empty"}}},
		{"InboundNameEmpty", dp("networking:\n  address: 10.0.0.1\n  inbound:\n  - {port: 80, name: '', tags: {kuma.io/service: a}}\n"), []v{{"spec.networking.inbound[0].name", "must not be empty"}}},
		{"UnknownKind", "type: VirtualOutbound\nname: x\nspec: {}\n", []v{{"type", `unknown kind "VirtualOutbound": must be one of`}}},
		{"MissingType", "name: x\nspec: {}\n", []v{{"type", "required"}}},
		{"TypeNotAString", "type: 5\nname: x\n", []v{{"type", "must be a string"}}},
		{"NotAnObject", "- a\n- b\n", []v{{DocumentField, "must be an object"}}},
		{"InvalidYAML", "a: [\n", []v{{DocumentField, "invalid YAML"}}},
		// seed 000 writes the template unquoted, which YAML reads as a map.
		{"UnquotedTemplate", "type: HostnameGenerator\nname: x\nspec:\n  template: {{ name }}.mesh\n", []v{{DocumentField, "invalid YAML"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Decode([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Decode succeeded: %+v", o)
			}
			errs, ok := validate.From(err)
			if !ok {
				t.Fatalf("Decode error %v (%T) is not validate.Errors", err, err)
			}
			checkViolations(t, errs, tt.want)
		})
	}
}

func TestDecode_ReadOnlyFieldsIgnored(t *testing.T) {
	o := decodeDefault(t, `
type: MeshService
name: redis
mesh: default
creationTime: "2024-05-01T10:00:00Z"
modificationTime: "2024-05-01T11:00:00Z"
spec:
  ports:
  - port: 6379
status:
  addresses:
  - hostname: redis.svc.mesh.local
    status: Available
    origin: {kind: HostnameGenerator, name: local}
  vips:
  - ip: 241.0.0.1
    type: Kuma
  anything: goes
`)
	if o.Status != nil {
		t.Errorf("Status = %+v, want nil: status is read-only", o.Status)
	}
	if !o.CreationTime.IsZero() || !o.ModificationTime.IsZero() {
		t.Errorf("times = %v, %v; want zero: they are read-only", o.CreationTime, o.ModificationTime)
	}
	if errs := Validate(o); len(errs) > 0 {
		t.Errorf("Validate: %v", errs)
	}
}

func TestDecode_JSON(t *testing.T) {
	o := decodeDefault(t, `{"type":"MeshService","name":"redis","mesh":"default","spec":{"ports":[{"port":6379,"targetPort":"redis"}]}}`)
	got := o.Spec.(*MeshServiceSpec).Ports[0]
	want := Port{Port: 6379, TargetPort: &IntOrString{String: "redis", IsName: true}, AppProtocol: ProtocolTCP}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("port (-want +got):\n%s", diff)
	}
}

func TestDecode_SeedAliases(t *testing.T) {
	t.Run("HostnameGeneratorLabels", func(t *testing.T) {
		o := decodeDefault(t, hg("template: '{{ .Name }}.mesh'\nselector:\n  meshService:\n    labels:\n      kuma.io/zone: east\n    matchLabels:\n      app: redis\n"))
		got := o.Spec.(*HostnameGeneratorSpec).Selector.MeshService
		want := &LabelSelector{MatchLabels: map[string]string{"kuma.io/zone": "east", "app": "redis"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("selector (-want +got):\n%s", diff)
		}
	})
	t.Run("MeshServiceDataplaneTags", func(t *testing.T) {
		o := decodeDefault(t, msvc("selector:\n  dataplane:\n    tags:\n      kuma.io/service: backend\n"))
		got := o.Spec.(*MeshServiceSpec).Selector
		want := MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": "backend"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("selector (-want +got):\n%s", diff)
		}
	})
	t.Run("MultiZoneLabels", func(t *testing.T) {
		o := decodeDefault(t, mzsvc("selector:\n  meshService:\n    labels: {app: b}\n"))
		got := o.Spec.(*MeshMultiZoneServiceSpec).Selector.MeshService
		want := &LabelSelector{MatchLabels: map[string]string{"app": "b"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("selector (-want +got):\n%s", diff)
		}
	})
}

// validDocs are accepted documents of every kind, for round trips.
var validDocs = map[string]string{
	"Mesh": "type: Mesh\nname: default\nspec: {}\n",
	"Zone": "type: Zone\nname: east\nlabels: {kuma.io/origin: global}\nspec:\n  enabled: true\n",
	"Dataplane": dp("networking:\n  address: 10.0.0.1\n  inbound:\n  - port: 8080\n    servicePort: 80\n    serviceAddress: 127.0.0.1\n" +
		"    tags: {kuma.io/service: frontend_default_svc_80, kuma.io/protocol: http}\n"),
	"MeshService": msvc("selector:\n  dataplane:\n    tags: {kuma.io/service: redis}\nports:\n- {name: redis, port: 6379, targetPort: redis, appProtocol: TCP}\n- {port: 8080, targetPort: 80}\n" +
		"identities:\n- {type: ServiceTag, value: redis}\nstate: Available\nexport: {mode: All}\n"),
	"MeshServiceDataplaneLabels": msvc("selector:\n  dataplaneLabels: {labels: {app: redis}}\n"),
	"MeshExternalService": withTLS(extsvc("match:\n- {type: InternalVIP, value: api.ext.local, port: 443, protocol: tls}\n- {type: CIDR, value: 10.0.0.0/8, port: 80}\n" +
		"destination:\n  type: Regular\n  endpoints:\n  - {address: 'unix:///run/a.sock'}\n  - {address: api.example.com, port: 443}\n" +
		"  tls:\n    enabled: true\n    version: {min: TLS_AUTO, max: TLSv1_3}\n    verification: {skip: false, subjectAltNames: [api.example.com]}\n" +
		"    caCert: {inline: $CA}\n    clientCert: {inlineString: $CERT_STRING}\n    clientKey: {secret: key}\n")),
	"MeshExternalServiceExtension": extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 80}\ndestination:\n  type: Extension\n" +
		"  extension:\n    type: Lambda\n    config: {arn: 'arn:aws:lambda:x', retries: 3, nested: {list: [1, 2.5, true, null]}}\n"),
	"MeshMultiZoneService": mzsvc("selector:\n  meshService:\n    matchLabels: {kuma.io/display-name: backend}\nports:\n- {port: 80, name: http, appProtocol: http}\n"),
	"ZoneIngress":          "type: ZoneIngress\nname: ingress-1\nspec:\n  networking: {address: 192.168.0.1, port: 10001, advertisedAddress: 'fd00::1', advertisedPort: 443}\n",
	"HostnameGenerator":    hg("template: '{{ label \"k8s.kuma.io/service-name\" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local'\nselector:\n  meshService:\n    labels: {kuma.io/env: kubernetes}\n"),
}

func TestDecode_RoundTrip(t *testing.T) {
	for name, text := range validDocs {
		t.Run(name, func(t *testing.T) {
			o := decodeDefault(t, text)
			if errs := Validate(o); len(errs) > 0 {
				t.Fatalf("Validate: %v", errs)
			}
			j, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			again := decodeDefault(t, string(j))
			if diff := cmp.Diff(o, again, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decode(MarshalJSON(o)) differs (-first +second):\n%s\nJSON: %s", diff, j)
			}
			// The YAML encoding must round trip too (get -o yaml | apply).
			y, err := EncodeYAML(o)
			if err != nil {
				t.Fatal(err)
			}
			fromYAML := decodeDefault(t, string(y))
			if diff := cmp.Diff(o, fromYAML, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decode(EncodeYAML(o)) differs (-first +second):\n%s\nYAML:\n%s", diff, y)
			}
		})
	}
}

// ---- Clone ----

// fill sets every exported field reachable from v to a non-zero value,
// numbering the values from *n so that two fills give equal results.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n % 200))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, n)
			fill(e, n)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		// No interface fields in specs or statuses today.
	default:
		panic("fill: unhandled kind " + v.Kind().String())
	}
}

// mutate changes every value reachable from v in place: through pointers,
// slice elements and map entries, so that any memory the clone shares with
// the original shows up as a change in the original.
func mutate(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "-mutated")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				mutate(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			mutate(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			mutate(e)
			v.SetMapIndex(k, e)
		}
	}
}

func TestClone_SharesNoMemory(t *testing.T) {
	newObject := func(d *Descriptor) *Object {
		n := 0
		o := &Object{Kind: d.Kind, Name: "x", Mesh: "m", Labels: map[string]string{"a": "b"}, Version: 3, Revision: 7}
		o.Spec = d.NewSpec()
		fill(reflect.ValueOf(o.Spec).Elem(), &n)
		if st := d.NewStatus(); st != nil {
			fill(reflect.ValueOf(st).Elem(), &n)
			o.Status = st
		}
		return o
	}
	for _, d := range Descriptors() {
		t.Run(string(d.Kind), func(t *testing.T) {
			orig, want := newObject(d), newObject(d)
			c := orig.Clone()
			if diff := cmp.Diff(orig, c); diff != "" {
				t.Fatalf("clone differs from the original (-orig +clone):\n%s", diff)
			}
			c.Labels["a"] = "changed"
			mutate(reflect.ValueOf(c.Spec).Elem())
			if c.Status != nil {
				mutate(reflect.ValueOf(c.Status).Elem())
			}
			if diff := cmp.Diff(want, orig); diff != "" {
				t.Errorf("mutating the clone changed the original (-want +got):\n%s", diff)
			}
			if d.Kind != Mesh && cmp.Equal(orig.Spec, c.Spec) {
				t.Errorf("mutate did not reach the clone's spec; the test proves nothing")
			}
		})
	}
}

// Kuma writes Dataplanes and Meshes with their spec at the top level; both
// shapes decode to the same object.
func TestDecode_LegacyShape(t *testing.T) {
	flat := "type: Dataplane\nmesh: default\nname: dp-1\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - {port: 80, tags: {kuma.io/service: web}}\n"
	nested := "type: Dataplane\nmesh: default\nname: dp-1\nspec:\n  networking:\n    address: 10.0.0.1\n    inbound:\n    - {port: 80, tags: {kuma.io/service: web}}\n"
	a, err := Decode([]byte(flat))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode([]byte(nested))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(b, a); d != "" {
		t.Errorf("flat and nested differ (-nested +flat):\n%s", d)
	}
	for _, tc := range []struct {
		name, text string
		want       []v
	}{
		{"Both", flat + "spec: {}\n", []v{{"spec", "must not be given together with top-level spec fields"}}},
		{"UnknownTopLevel", "type: Dataplane\nmesh: default\nname: dp-1\nnetwork: {}\n", []v{{"spec.network", "unknown field"}}},
		{"MeshFlatLifted", "type: Mesh\nname: prod\nmtls: {}\n", []v{{"spec.mtls", "unknown field"}}},
		{"ZoneIngressAdminPort", "type: ZoneIngress\nname: ingress-1\nnetworking: {address: 10.0.0.1, port: 10001, admin: {port: 9901}}\n", []v{{"spec.networking.admin", "unknown field"}}},
		{"ZoneIngressZone", "type: ZoneIngress\nname: ingress-1\nzone: east\nnetworking: {address: 10.0.0.1, port: 10001}\n", []v{{"spec.zone", "unknown field"}}},
		{"NotForNewKinds", "type: MeshService\nmesh: default\nname: web\nports: []\n", []v{{"ports", "unknown field"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := DecodePartial([]byte(tc.text))
			checkViolations(t, errs, tc.want)
		})
	}
}
