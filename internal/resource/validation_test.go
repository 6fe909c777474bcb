package resource

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/tools/txtar"

	"github.com/meshnames/meshnames/internal/validate"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/validate")

// ---- helpers: every test goes through the real path, YAML text -> Decode ->
// Default -> Validate ----

// doc builds a document of kind with the given spec (written without
// indentation; it is indented under spec:).
func doc(kind Kind, name, spec string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "type: %s\nname: %s\n", kind, name)
	if MustLookup(kind).MeshScoped {
		b.WriteString("mesh: default\n")
	}
	b.WriteString("spec:\n")
	for _, l := range strings.Split(strings.TrimRight(spec, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func msvc(spec string) string   { return doc(MeshService, "redis", spec) }
func extsvc(spec string) string { return doc(MeshExternalService, "httpbin", spec) }
func mzsvc(spec string) string  { return doc(MeshMultiZoneService, "backend", spec) }
func hg(spec string) string     { return doc(HostnameGenerator, "local-universal-mesh-service", spec) }
func dp(spec string) string     { return doc(Dataplane, "dp-1", spec) }

// decodeDefault decodes a document that must decode and applies defaults.
func decodeDefault(t *testing.T, text string) *Object {
	t.Helper()
	o, err := Decode([]byte(text))
	if err != nil {
		t.Fatalf("Decode: %v\ndocument:\n%s", err, text)
	}
	o.Spec.Default()
	return o
}

func validateDoc(t *testing.T, text string) validate.Errors {
	t.Helper()
	return Validate(decodeDefault(t, text))
}

// v is an expected violation: the exact field, and a part of the message
// ("" accepts any message).
type v struct {
	field string
	msg   string
}

// checkViolations asserts got holds exactly the wanted fields (as a
// multiset, so that a rule reported twice is caught) and that each wanted
// message part appears in a violation of that field.
func checkViolations(t *testing.T, got validate.Errors, want []v) {
	t.Helper()
	var gotFields, wantFields []string
	for _, g := range got {
		gotFields = append(gotFields, g.Field)
	}
	for _, w := range want {
		wantFields = append(wantFields, w.field)
	}
	slices.Sort(gotFields)
	slices.Sort(wantFields)
	if diff := cmp.Diff(wantFields, gotFields, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("violation fields (-want +got):\n%s\nall violations:\n%s", diff, list(got))
	}
	for _, w := range want {
		if w.msg == "" {
			continue
		}
		found := false
		for _, g := range got {
			if g.Field == w.field && strings.Contains(g.Message, w.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("no violation of %s contains %q; all violations:\n%s", w.field, w.msg, list(got))
		}
	}
}

func list(errs validate.Errors) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %s: %s\n", e.Field, e.Message)
	}
	return b.String()
}

type validationCase struct {
	name string
	doc  string
	want []v // nil: valid
}

func runValidation(t *testing.T, cases []validationCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkViolations(t, validateDoc(t, tc.doc), tc.want)
		})
	}
}

// ---- object level ----

func TestValidate_Object(t *testing.T) {
	labels := func(n int) string {
		var b strings.Builder
		b.WriteString("labels:\n")
		for i := range n {
			fmt.Fprintf(&b, "  l%d: v\n", i)
		}
		return b.String()
	}
	runValidation(t, []validationCase{
		{"ServiceNameIsDNS1035Label", "type: MeshService\nname: Redis\nmesh: default\nspec: {}\n", []v{{"name", "DNS-1035 label"}}},
		{"ServiceNameHasNoDots", "type: MeshExternalService\nname: redis.demo\nmesh: default\nspec:\n  match:\n  - {type: IP, value: 1.1.1.1, port: 80}\n", []v{{"name", "DNS-1035"}}},
		{"ServiceNameStartsWithLetter", "type: MeshMultiZoneService\nname: 1backend\nmesh: default\nspec:\n  selector:\n    meshService:\n      matchLabels: {app: b}\n", []v{{"name", "DNS-1035"}}},
		{"ServiceNameTooLong", "type: MeshService\nname: " + strings.Repeat("a", 64) + "\nmesh: default\nspec: {}\n", []v{{"name", "no more than 63"}}},
		{"DataplaneNameMayHaveDots", "type: Dataplane\nname: backend-1.kuma-demo\nmesh: default\nspec:\n  networking:\n    address: 10.0.0.1\n", nil},
		{"MissingName", "type: Zone\nspec: {}\n", []v{{"name", "must not be empty"}}},
		{"MeshRequired", "type: MeshService\nname: redis\nspec: {}\n", []v{{"mesh", "must not be empty"}}},
		{"MeshInvalid", "type: MeshService\nname: redis\nmesh: Default\nspec: {}\n", []v{{"mesh", "lower case"}}},
		{"MeshNameFitsALabel", "type: Mesh\nname: " + strings.Repeat("a", 40) + "." + strings.Repeat("b", 22) + "\nspec: {}\n", nil},
		{"MeshNameLongerThanALabel", "type: Mesh\nname: " + strings.Repeat("a", 40) + "." + strings.Repeat("b", 23) + "\nspec: {}\n", []v{{"name", "kuma.io/mesh label"}}},
		{"MeshOfALongName", "type: Dataplane\nname: dp\nmesh: " + strings.Repeat("a", 40) + "." + strings.Repeat("b", 40) + "\nspec:\n  networking:\n    address: 10.0.0.1\n", []v{{"mesh", "no more than 63"}}},
		{"DataplaneNameOf250", "type: Dataplane\nname: " + strings.Repeat("a", 61) + "." + strings.Repeat("b", 62) + "." + strings.Repeat("c", 62) + "." + strings.Repeat("d", 62) + "\nmesh: default\nspec:\n  networking:\n    address: 10.0.0.1\n", nil},
		{"MeshForbiddenOnGlobalKinds", "type: HostnameGenerator\nname: hg\nmesh: default\nspec:\n  selector: {meshService: {}}\n  template: '{{ .Name }}.mesh'\n", []v{{"mesh", "not mesh-scoped"}}},
		{"MeshForbiddenOnMesh", "type: Mesh\nname: default\nmesh: default\nspec: {}\n", []v{{"mesh", ""}}},
		{"Mesh", "type: Mesh\nname: default\nspec: {}\n", nil},
		{"MeshWithoutSpec", "type: Mesh\nname: default\n", nil},
		{"Zone", "type: Zone\nname: zone-1\nspec:\n  enabled: false\n", nil},
		{"Labels", "type: Zone\nname: east\nlabels:\n  kuma.io/origin: global\n  app: frontend_default_svc_80\n  k8s.kuma.io/namespace: kuma-demo\nspec: {}\n", nil},
		{"LabelKeyInvalid", "type: Zone\nname: east\nlabels:\n  'bad key': x\nspec: {}\n", []v{{`labels["bad key"]`, "key: name part"}}},
		{"LabelKeyPrefixInvalid", "type: Zone\nname: east\nlabels:\n  'Kuma.io/zone': x\nspec: {}\n", []v{{`labels["Kuma.io/zone"]`, "key: prefix"}}},
		{"LabelValueInvalid", "type: Zone\nname: east\nlabels:\n  app: -x\nspec: {}\n", []v{{`labels["app"]`, "value: "}}},
		{"LabelKeyAndValueInvalid", "type: Zone\nname: east\nlabels:\n  'a b': 'c d'\nspec: {}\n", []v{{`labels["a b"]`, "key: "}, {`labels["a b"]`, "value: "}}},
		{"SixtyFourLabels", "type: Zone\nname: east\n" + labels(64) + "spec: {}\n", nil},
		{"TooManyLabels", "type: Zone\nname: east\n" + labels(65) + "spec: {}\n", []v{{"labels", "at most 64 entries, got 65"}}},
	})
}

func TestValidate_UnknownKind(t *testing.T) {
	checkViolations(t, Validate(&Object{Kind: "Bogus", Name: "x", Spec: &MeshSpec{}}), []v{{"type", `unknown kind "Bogus"`}})
}

func TestValidate_NilSpec(t *testing.T) {
	checkViolations(t, Validate(&Object{Kind: Zone, Name: "x"}), []v{{"spec", "must be set"}})
}

// ---- MeshService ----

func TestMeshService_Valid(t *testing.T) {
	runValidation(t, []validationCase{
		{"EmptySpec", msvc("{}"), nil},
		{"Full", msvc(`
selector:
  dataplaneTags:
    kuma.io/service: frontend_default_svc_80
ports:
- name: http
  port: 80
  targetPort: 8080
  appProtocol: http
- port: 443
  targetPort: https
  appProtocol: TCP
- port: 9000
identities:
- type: ServiceTag
  value: frontend_default_svc_80
- type: SpiffeID
  value: spiffe://default/frontend
state: Available
export:
  mode: All
`), nil},
		{"DataplaneRef", msvc("selector:\n  dataplaneRef:\n    name: backend-1.kuma-demo\n"), nil},
		{"DataplaneLabels", msvc("selector:\n  dataplaneLabels:\n    matchLabels:\n      app: backend\n"), nil},
		{"EmptyDataplaneLabels", msvc("selector:\n  dataplaneLabels: {}\n"), nil},
		{"SeedDataplaneAlias", msvc("selector:\n  dataplane:\n    tags:\n      kuma.io/service: backend\n"), nil},
		{"AliasWithEmptyDataplaneTags", msvc("selector:\n  dataplaneTags: {}\n  dataplane:\n    tags:\n      kuma.io/service: backend\n"), nil},
		{"StateUnavailable", msvc("state: Unavailable\n"), nil},
		{"ExportNone", msvc("export:\n  mode: None\n"), nil},
		{"MaxPorts", msvc(portsYAML(MaxPorts)), nil},
	})
}

func portsYAML(n int) string {
	var b strings.Builder
	b.WriteString("ports:\n")
	for i := range n {
		fmt.Fprintf(&b, "- port: %d\n", 1000+i)
	}
	return b.String()
}

func TestMeshService_Selector(t *testing.T) {
	runValidation(t, []validationCase{
		{"TagsAndRef", msvc("selector:\n  dataplaneTags: {app: a}\n  dataplaneRef: {name: dp-1}\n"),
			[]v{{"spec.selector", "at most one of dataplaneTags, dataplaneRef, dataplaneLabels or dataplane"}}},
		{"RefAndLabels", msvc("selector:\n  dataplaneRef: {name: dp-1}\n  dataplaneLabels: {matchLabels: {app: a}}\n"),
			[]v{{"spec.selector", "got dataplaneRef and dataplaneLabels"}}},
		{"TagsAndSeedAlias", msvc("selector:\n  dataplaneTags: {app: a}\n  dataplane: {tags: {app: b}}\n"),
			[]v{{"spec.selector", "got dataplaneTags and dataplane"}}},
		{"AllFour", msvc("selector:\n  dataplaneTags: {app: a}\n  dataplaneRef: {name: dp-1}\n  dataplaneLabels: {}\n  dataplane: {tags: {app: b}}\n"),
			[]v{{"spec.selector", "got dataplaneTags and dataplaneRef and dataplaneLabels and dataplane"}}},
		{"TagKeyInvalid", msvc("selector:\n  dataplaneTags: {'bad key': a}\n"), []v{{`spec.selector.dataplaneTags["bad key"]`, "key: "}}},
		{"TagValueInvalid", msvc("selector:\n  dataplaneTags: {kuma.io/service: 'front end'}\n"), []v{{`spec.selector.dataplaneTags["kuma.io/service"]`, "value: "}}},
		{"SeedAliasTagInvalid", msvc("selector:\n  dataplane: {tags: {kuma.io/service: '-x'}}\n"), []v{{`spec.selector.dataplaneTags["kuma.io/service"]`, "value: "}}},
		{"RefNameEmpty", msvc("selector:\n  dataplaneRef: {}\n"), []v{{"spec.selector.dataplaneRef.name", "must not be empty"}}},
		{"RefNameInvalid", msvc("selector:\n  dataplaneRef: {name: DP_1}\n"), []v{{"spec.selector.dataplaneRef.name", "lower case"}}},
		{"MatchLabelsInvalid", msvc("selector:\n  dataplaneLabels:\n    matchLabels: {'a/b/c': x, app: '_'}\n"),
			[]v{{`spec.selector.dataplaneLabels.matchLabels["a/b/c"]`, "key: "}, {`spec.selector.dataplaneLabels.matchLabels["app"]`, "value: "}}},
		{"LabelsConflictWithMatchLabels", msvc("selector:\n  dataplaneLabels:\n    matchLabels: {app: a}\n    labels: {app: b}\n"),
			[]v{{`spec.selector.dataplaneLabels.labels["app"]`, `conflicts with matchLabels["app"]`}}},
	})
}

func TestMeshService_Ports(t *testing.T) {
	runValidation(t, []validationCase{
		{"PortZero", msvc("ports:\n- port: 0\n"), []v{{"spec.ports[0].port", "between 1 and 65535, got 0"}}},
		{"PortMissing", msvc("ports:\n- name: http\n"), []v{{"spec.ports[0].port", "got 0"}}},
		{"PortTooHigh", msvc("ports:\n- port: 65536\n"), []v{{"spec.ports[0].port", "got 65536"}}},
		{"PortNegative", msvc("ports:\n- port: -1\n"), []v{{"spec.ports[0].port", "got -1"}}},
		{"NameNotDNSLabel", msvc("ports:\n- port: 80\n  name: HTTP\n"), []v{{"spec.ports[0].name", "DNS-1123 label"}}},
		{"NameTooLong", msvc("ports:\n- port: 80\n  name: " + strings.Repeat("a", 64) + "\n"), []v{{"spec.ports[0].name", "no more than 63"}}},
		{"DuplicatePort", msvc("ports:\n- port: 80\n- port: 81\n- port: 80\n"), []v{{"spec.ports[2].port", "duplicates spec.ports[0]: port 80"}}},
		{"DuplicateName", msvc("ports:\n- {port: 80, name: http}\n- {port: 81, name: http}\n"), []v{{"spec.ports[1].name", `duplicates spec.ports[0]: name "http"`}}},
		{"TargetPortZero", msvc("ports:\n- port: 80\n  targetPort: 0\n"), []v{{"spec.ports[0].targetPort", "got 0"}}},
		{"TargetPortTooHigh", msvc("ports:\n- port: 80\n  targetPort: 70000\n"), []v{{"spec.ports[0].targetPort", "got 70000"}}},
		{"TargetPortEmptyName", msvc("ports:\n- port: 80\n  targetPort: ''\n"), []v{{"spec.ports[0].targetPort", "must not be empty"}}},
		{"TargetPortBadName", msvc("ports:\n- port: 80\n  targetPort: Web_Port\n"), []v{{"spec.ports[0].targetPort", "DNS-1123 label"}}},
		{"TargetPortQuotedNumber", msvc("ports:\n- port: 80\n  targetPort: '8080'\n"), []v{{"spec.ports[0].targetPort", "must contain at least one letter"}}},
		{"NameAllDigits", msvc("ports:\n- port: 80\n  name: '8080'\n"), []v{{"spec.ports[0].name", "must contain at least one letter"}}},
		{"NameWithDigitsAndLetter", msvc("ports:\n- port: 80\n  name: 8080-a\n  targetPort: h2c\n"), nil},
		{"AppProtocolUnknown", msvc("ports:\n- port: 80\n  appProtocol: udp\n"), []v{{"spec.ports[0].appProtocol", `must be one of "tcp", "http", "http2", "grpc", got "udp"`}}},
		{"AppProtocolUpperCase", msvc("ports:\n- port: 80\n  appProtocol: GRPC\n"), nil},
		{"TooManyPorts", msvc(portsYAML(MaxPorts + 1)), []v{{"spec.ports", "at most 256 entries, got 257"}}},
		{"EveryPortReported", msvc("ports:\n- port: 0\n- port: 80\n  appProtocol: udp\n- port: 90\n  name: -a\n"),
			[]v{{"spec.ports[0].port", ""}, {"spec.ports[1].appProtocol", ""}, {"spec.ports[2].name", ""}}},
	})
}

func TestMeshService_DefaultLowercasesAppProtocol(t *testing.T) {
	o := decodeDefault(t, msvc("ports:\n- port: 80\n  appProtocol: HTTP2\n- port: 81\n"))
	got := o.Spec.(*MeshServiceSpec).Ports
	if got[0].AppProtocol != ProtocolHTTP2 || got[1].AppProtocol != ProtocolTCP {
		t.Errorf("appProtocols after Default = %q, %q; want %q, %q", got[0].AppProtocol, got[1].AppProtocol, ProtocolHTTP2, ProtocolTCP)
	}
}

func TestMeshService_Identities(t *testing.T) {
	runValidation(t, []validationCase{
		{"TypeUnknown", msvc("identities:\n- type: Token\n  value: x\n"), []v{{"spec.identities[0].type", `must be one of "ServiceTag", "SpiffeID"`}}},
		{"TypeMissing", msvc("identities:\n- value: x\n"), []v{{"spec.identities[0].type", `got ""`}}},
		{"ValueMissing", msvc("identities:\n- type: SpiffeID\n"), []v{{"spec.identities[0].value", "must not be empty"}}},
		{"ServiceTagNotLabelValue", msvc("identities:\n- type: ServiceTag\n  value: 'a b'\n"), []v{{"spec.identities[0].value", "letters, digits"}}},
		{"SpiffeIDWithoutScheme", msvc("identities:\n- type: SpiffeID\n  value: default/frontend\n"), []v{{"spec.identities[0].value", "spiffe://"}}},
		{"TooMany", msvc("identities:\n" + strings.Repeat("- {type: ServiceTag, value: a}\n", MaxIdentities+1)), []v{{"spec.identities", "at most 64 entries, got 65"}}},
	})
}

func TestMeshService_StateAndExport(t *testing.T) {
	runValidation(t, []validationCase{
		{"StateUnknown", msvc("state: Ready\n"), []v{{"spec.state", `must be one of "Available", "Unavailable", got "Ready"`}}},
		{"ExportModeMissing", msvc("export: {}\n"), []v{{"spec.export.mode", `must be one of "All", "None", got ""`}}},
		{"ExportModeUnknown", msvc("export:\n  mode: Some\n"), []v{{"spec.export.mode", `got "Some"`}}},
	})
}

func TestMeshService_ReportsAllViolations(t *testing.T) {
	got := validateDoc(t, msvc(`
selector:
  dataplaneRef: {name: ''}
ports:
- port: 0
state: Ready
`))
	checkViolations(t, got, []v{
		{"spec.selector.dataplaneRef.name", ""},
		{"spec.ports[0].port", ""},
		{"spec.state", ""},
	})
}

// ---- MeshMultiZoneService ----

func TestMeshMultiZoneService(t *testing.T) {
	sel := "selector:\n  meshService:\n    matchLabels:\n      kuma.io/display-name: backend\n"
	runValidation(t, []validationCase{
		{"Valid", mzsvc(sel + "ports:\n- port: 80\n  name: http\n  appProtocol: HTTP\n"), nil},
		{"PortsOptional", mzsvc(sel), nil},
		{"SeedLabelsAlias", mzsvc("selector:\n  meshService:\n    labels:\n      app: backend\n"), nil},
		{"SelectorMissing", mzsvc("ports:\n- port: 80\n"), []v{{"spec.selector.meshService", "must be set"}}},
		{"MatchLabelsEmpty", mzsvc("selector:\n  meshService: {}\n"), []v{{"spec.selector.meshService.matchLabels", "must select at least one label"}}},
		{"MatchLabelsEmptyMap", mzsvc("selector:\n  meshService:\n    matchLabels: {}\n"), []v{{"spec.selector.meshService.matchLabels", "must select at least one label"}}},
		{"MatchLabelInvalid", mzsvc("selector:\n  meshService:\n    matchLabels: {'kuma.io/': x}\n"), []v{{`spec.selector.meshService.matchLabels["kuma.io/"]`, "key: name part must not be empty"}}},
		{"LabelsConflict", mzsvc("selector:\n  meshService:\n    matchLabels: {app: a}\n    labels: {app: b}\n"), []v{{`spec.selector.meshService.labels["app"]`, "conflicts"}}},
		{"PortRulesShared", mzsvc(sel + "ports:\n- port: 80\n- port: 80\n  name: A\n  appProtocol: udp\n"),
			[]v{{"spec.ports[1].port", "duplicates spec.ports[0]"}, {"spec.ports[1].name", ""}, {"spec.ports[1].appProtocol", ""}}},
		{"TargetPortForbidden", mzsvc(sel + "ports:\n- port: 80\n  targetPort: 8080\n"), []v{{"spec.ports[0].targetPort", "must not be set"}}},
		{"TooManyPorts", mzsvc(sel + portsYAML(MaxPorts+1)), []v{{"spec.ports", "at most 256"}}},
	})
}

// ---- HostnameGenerator (seeds 000, 001) ----

func TestHostnameGenerator(t *testing.T) {
	runValidation(t, []validationCase{
		// seed 001 defaults.
		{"SeedLocalUniversal", hg("template: '{{ .Name }}.svc.mesh.local'\nselector:\n  meshService:\n    matchLabels:\n      kuma.io/origin: zone\n"), nil},
		{"SeedSyncedKube", hg("template: '{{ label \"k8s.kuma.io/service-name\" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local'\nselector:\n  meshService:\n    matchLabels:\n      kuma.io/env: kubernetes\n      kuma.io/origin: global\n      k8s.kuma.io/is-headless-service: 'false'\n"), nil},
		{"SeedExternal", hg("template: '{{ .DisplayName }}.extsvc.mesh.local'\nselector:\n  meshExternalService:\n    matchLabels:\n      kuma.io/origin: zone\n"), nil},
		{"SeedMultiZoneSelectsAll", hg("template: '{{ .DisplayName }}.mzsvc.mesh.local'\nselector:\n  meshMultiZoneService: {}\n"), nil},
		// seed 000: `labels` and the name function.
		{"SeedLabelsAlias", hg("template: '{{ label \"k8s.kuma.io/service-name\" }}.{{ label \"k8s.kuma.io/namespace\" }}.svc.mesh.{{ label \"kuma.io/zone\" }}'\nselector:\n  meshService:\n    labels:\n      kuma.io/zone: east\n"), nil},
		{"SeedNameFunction", hg("template: '{{ name }}.svc.meshext.local'\nselector:\n  meshExternalService: {}\n"), nil},
		{"NoSelector", hg("template: '{{ .Name }}.mesh'\n"), []v{{"spec.selector", "must set exactly one of meshService, meshExternalService or meshMultiZoneService, got 0"}}},
		{"TwoSelectors", hg("template: '{{ .Name }}.mesh'\nselector:\n  meshService: {}\n  meshMultiZoneService: {}\n"), []v{{"spec.selector", "got 2"}}},
		{"MatchLabelInvalid", hg("template: '{{ .Name }}.mesh'\nselector:\n  meshExternalService:\n    matchLabels: {app: 'a b'}\n"), []v{{`spec.selector.meshExternalService.matchLabels["app"]`, "value: "}}},
		{"LabelsConflict", hg("template: '{{ .Name }}.mesh'\nselector:\n  meshService:\n    matchLabels: {app: a}\n    labels: {app: b}\n"), []v{{`spec.selector.meshService.labels["app"]`, "conflicts"}}},
		{"TemplateMissing", hg("selector:\n  meshService: {}\n"), []v{{"spec.template", "must not be empty"}}},
		{"TemplateUpperCase", hg("template: '{{ .Name }}.MESH'\nselector:\n  meshService: {}\n"), []v{{"spec.template", `template renders to "name.MESH" which is not a valid DNS name`}}},
		{"TemplateUnknownField", hg("template: '{{ .Foo }}.mesh'\nselector:\n  meshService: {}\n"), []v{{"spec.template", "cannot render template with stub values"}}},
		{"TemplateSyntax", hg("template: '{{ .Name '\nselector:\n  meshService: {}\n"), []v{{"spec.template", "cannot parse template"}}},
		{"TemplateTrailingNewline", hg("template: |\n  {{ .Name }}.mesh\nselector:\n  meshService: {}\n"), []v{{"spec.template", `"name.mesh\n"`}}},
		{"AllAtOnce", hg("template: '{{ .Name }}..mesh'\nselector:\n  meshService: {matchLabels: {'-': x}}\n  meshExternalService: {}\n"),
			[]v{{"spec.selector", ""}, {`spec.selector.meshService.matchLabels["-"]`, ""}, {"spec.template", ""}}},
	})
}

// ---- Dataplane ----

func TestDataplane(t *testing.T) {
	in := func(inbound string) string {
		return dp("networking:\n  address: 10.0.0.1\n  inbound:\n  - " + inbound + "\n")
	}
	var many strings.Builder
	for i := range MaxInbounds + 1 {
		fmt.Fprintf(&many, "\n  - {port: %d, tags: {kuma.io/service: a}}", 1000+i)
	}
	runValidation(t, []validationCase{
		{"Valid", dp(`
networking:
  address: 10.0.0.1
  inbound:
  - port: 8080
    servicePort: 80
    serviceAddress: 127.0.0.1
    tags:
      kuma.io/service: frontend_default_svc_80
      kuma.io/protocol: http
      kuma.io/export-mode: None
  - port: 9090
    tags:
      kuma.io/service: metrics
`), nil},
		{"AddressIsDomain", dp("networking:\n  address: dp-1.kuma-demo.svc\n"), nil},
		{"AddressIsIPv6", dp("networking:\n  address: 'fd00::1'\n"), nil},
		{"AddressMissing", dp("networking: {}\n"), []v{{"spec.networking.address", "must not be empty"}}},
		{"AddressUnspecifiedV4", dp("networking:\n  address: 0.0.0.0\n"), []v{{"spec.networking.address", "must not be 0.0.0.0 or ::"}}},
		{"AddressUnspecifiedV6", dp("networking:\n  address: '::'\n"), []v{{"spec.networking.address", "must not be 0.0.0.0 or ::"}}},
		{"AddressBadIP", dp("networking:\n  address: 10.0.0.256\n"), []v{{"spec.networking.address", "must be an IP address or a DNS name"}}},
		{"AddressBadName", dp("networking:\n  address: 'dp 1'\n"), []v{{"spec.networking.address", "must be an IP address or a DNS name"}}},
		{"InboundPort", in("{port: 0, tags: {kuma.io/service: a}}"), []v{{"spec.networking.inbound[0].port", "got 0"}}},
		{"ServicePort", in("{port: 80, servicePort: 70000, tags: {kuma.io/service: a}}"), []v{{"spec.networking.inbound[0].servicePort", "got 70000"}}},
		{"ServiceAddress", in("{port: 80, serviceAddress: localhost, tags: {kuma.io/service: a}}"), []v{{"spec.networking.inbound[0].serviceAddress", "must be an IP address"}}},
		{"TagsMissingKuma3", in("{port: 80}"), nil},
		{"TagsEmptyKuma3", in("{port: 80, tags: {}}"), nil},
		{"ServiceTagMissing", in("{port: 80, tags: {app: a}}"), []v{{"spec.networking.inbound[0].tags", "kuma.io/service"}}},
		{"ServiceTagEmpty", in("{port: 80, tags: {kuma.io/service: ''}}"), []v{{`spec.networking.inbound[0].tags["kuma.io/service"]`, "must not be empty"}}},
		{"ServiceTagInvalid", in("{port: 80, tags: {kuma.io/service: 'a b'}}"), []v{{`spec.networking.inbound[0].tags["kuma.io/service"]`, "value: "}}},
		{"InboundName", in("{name: http, port: 80, tags: {kuma.io/service: a}}"), nil},
		{"InboundNameDigits", in("{name: '80', port: 80, tags: {kuma.io/service: a}}"), []v{{"spec.networking.inbound[0].name", "must contain at least one letter"}}},
		{"ServiceTagLong", in("{port: 80, tags: {kuma.io/service: " + strings.Repeat("a", 200) + "}}"), nil},
		{"ServiceTagTooLong", in("{port: 80, tags: {kuma.io/service: " + strings.Repeat("a", 254) + "}}"), []v{{`spec.networking.inbound[0].tags["kuma.io/service"]`, "value: must be no more than 253 characters"}}},
		{"ServiceTagColon", in("{port: 80, tags: {kuma.io/service: 'a:b'}}"), nil},
		{"ExportModeTag", in("{port: 80, tags: {kuma.io/service: a, kuma.io/export-mode: Some}}"), []v{{`spec.networking.inbound[0].tags["kuma.io/export-mode"]`, `must be one of "All", "None", got "Some"`}}},
		{"DuplicatePort", dp("networking:\n  address: 10.0.0.1\n  inbound:\n  - {port: 80, tags: {kuma.io/service: a}}\n  - {port: 80, tags: {kuma.io/service: b}}\n"),
			[]v{{"spec.networking.inbound[1].port", "must be unique: inbound[0] listens on 80 too"}}},
		{"TagKeyInvalid", in("{port: 80, tags: {kuma.io/service: a, 'x y': z}}"), []v{{`spec.networking.inbound[0].tags["x y"]`, "key: "}}},
		{"ProtocolTagUnknown", in("{port: 80, tags: {kuma.io/service: a, kuma.io/protocol: udp}}"), []v{{`spec.networking.inbound[0].tags["kuma.io/protocol"]`, `must be one of "tcp", "http", "http2", "grpc", got "udp"`}}},
		{"TooManyInbounds", dp("networking:\n  address: 10.0.0.1\n  inbound:" + many.String() + "\n"), []v{{"spec.networking.inbound", "at most 256 entries, got 257"}}},
		{"AllAtOnce", dp("networking:\n  address: 0.0.0.0\n  inbound:\n  - {port: 0, tags: {app: a}}\n  - {port: 80, tags: {kuma.io/service: ok, kuma.io/protocol: TCP}}\n"),
			[]v{{"spec.networking.address", ""}, {"spec.networking.inbound[0].port", ""}, {"spec.networking.inbound[0].tags", ""}, {`spec.networking.inbound[1].tags["kuma.io/protocol"]`, ""}}},
	})
}

// ---- golden files: whole documents with every message spelled out ----

// TestValidate_Golden runs each testdata/validate/*.txtar: the input.yaml
// section is decoded, defaulted and validated; the result is compared with
// the violations section (one "field: message" per line, then the warnings
// prefixed "warning: "). Run with -update to rewrite the expectations.
func TestValidate_Golden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "validate", "*.txtar"))
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
			var input []byte
			for _, f := range ar.Files {
				if f.Name == "input.yaml" {
					input = f.Data
				}
			}
			o := decodeDefault(t, string(input))
			var b strings.Builder
			for _, e := range Validate(o) {
				fmt.Fprintf(&b, "%s: %s\n", e.Field, e.Message)
			}
			for _, w := range Warnings(o) {
				fmt.Fprintf(&b, "warning: %s\n", w)
			}
			got := b.String()
			if *update {
				ar.Files = []txtar.File{{Name: "input.yaml", Data: input}, {Name: "violations", Data: []byte(got)}}
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			var want string
			for _, f := range ar.Files {
				if f.Name == "violations" {
					want = string(f.Data)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("violations (-want +got), run with -update if intended:\n%s", diff)
			}
		})
	}
}
