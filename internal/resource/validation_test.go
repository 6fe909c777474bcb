package resource

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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

// ---- MeshExternalService (seed 003) ----

func TestMeshExternalService_Valid(t *testing.T) {
	runValidation(t, []validationCase{
		// seed 003 "Wildcard domain": Passthrough is the default.
		{"SeedWildcard", extsvc("match:\n- type: Domain\n  value: '*.eu-west-3.aws.cloud'\n  port: 9092\n  protocol: tls\n"), nil},
		// seed 003 "Domain generation".
		{"SeedMongo", extsvc(`
match:
- type: InternalVIP
  value: mongo.ext.svc.local
  port: 27017
  protocol: tcp
destination:
  type: Regular
  endpoints:
  - address: 10.0.0.1
    port: 27017
  - address: 10.0.0.2
    port: 27017
`), nil},
		// seed 003 "Extensability".
		{"SeedExtension", extsvc(`
match:
- type: InternalVIP
  value: example.ext.svc.local
  port: 80
  protocol: http
destination:
  type: Extension
  extension:
    type: Lambda
    config:
      arn: arn:aws:lambda:us-west-2:123456789012:function:my-function
`), nil},
		{"RegularEverything", withTLS(extsvc(`
match:
- {type: InternalVIP, value: example.ext.svc.local, port: 80, protocol: http}
- {type: Domain, value: httpbin.com, port: 80, protocol: HTTP}
- {type: CIDR, value: 10.1.1.0/24, port: 81, protocol: grpc}
- {type: CIDR, value: '2001:db8::/32', port: 82, protocol: http2}
- {type: IP, value: 192.168.0.1, port: 443, protocol: tls}
- {type: IP, value: '::1', port: 8080}
destination:
  type: Regular
  endpoints:
  - address: 1.1.1.1
    port: 12345
  - address: example.com
    port: 443
  - address: 'unix:///run/app.sock'
  - address: '2001:db8::1'
    port: 443
  tls:
    enabled: true
    version:
      min: TLSv1_2
      max: TLSv1_3
    allowRenegotiation: false
    verification:
      skip: true
      subjectAltNames:
      - example.com
      - spiffe://example.local/ns/local
      serverName: example.com
    caCert:
      inline: $CA
    clientCert:
      secret: client-cert
    clientKey:
      inlineString: $KEY_STRING
`)), nil},
		{"TLSAutoAndSpecific", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n  tls:\n    version: {min: TLS_AUTO, max: TLSv1_0}\n"), nil},
		{"TLSMinEqualsMax", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n  tls:\n    version: {min: TLSv1_2, max: TLSv1_2}\n"), nil},
		{"PassthroughExplicit", extsvc("match:\n- {type: CIDR, value: 0.0.0.0/0, port: 443, protocol: tls}\ndestination:\n  type: Passthrough\n"), nil},
		{"MaxMatches", extsvc(matchesYAML(MaxMatches)), nil},
	})
}

func matchesYAML(n int) string {
	var b strings.Builder
	b.WriteString("match:\n")
	for i := range n {
		fmt.Fprintf(&b, "- {type: IP, value: 10.0.%d.%d, port: 80}\n", i/256, i%256)
	}
	return b.String()
}

func TestMeshExternalService_DefaultProtocolAndDestination(t *testing.T) {
	o := decodeDefault(t, extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 80}\n- {type: IP, value: 1.1.1.2, port: 80, protocol: HTTP2}\n"))
	s := o.Spec.(*MeshExternalServiceSpec)
	if s.Match[0].Protocol != ProtocolTCP || s.Match[1].Protocol != ProtocolHTTP2 {
		t.Errorf("protocols after Default = %q, %q; want tcp, http2", s.Match[0].Protocol, s.Match[1].Protocol)
	}
	if s.Destination == nil || s.Destination.Type != DestinationPassthrough {
		t.Errorf("destination after Default = %+v, want type Passthrough (seed 003 default)", s.Destination)
	}
}

func TestMeshExternalService_Match(t *testing.T) {
	one := func(m string) string { return extsvc("match:\n- " + m + "\n") }
	regular := func(m string) string {
		return extsvc("match:\n- " + m + "\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n")
	}
	runValidation(t, []validationCase{
		{"MatchMissing", extsvc("destination:\n  type: Passthrough\n"), []v{{"spec.match", "at least one entry"}}},
		{"MatchEmpty", extsvc("match: []\n"), []v{{"spec.match", "at least one entry"}}},
		{"TooManyMatches", extsvc(matchesYAML(MaxMatches + 1)), []v{{"spec.match", "at most 256 entries, got 257"}}},
		{"TypeUnknown", one("{type: Host, value: a.com, port: 80}"), []v{{"spec.match[0].type", `must be one of "InternalVIP", "Domain", "CIDR", "IP", "HostnameGenerator", got "Host"`}}},
		{"ValueMissing", one("{type: Domain, port: 80}"), []v{{"spec.match[0].value", "must not be empty"}}},
		{"InternalVIPUpperCase", one("{type: InternalVIP, value: Mongo.ext, port: 80}"), []v{{"spec.match[0].value", "lower case RFC 1123"}}},
		{"InternalVIPWildcard", one("{type: InternalVIP, value: '*.ext', port: 80}"), []v{{"spec.match[0].value", "RFC 1123"}}},
		{"DomainUnderscore", one("{type: Domain, value: http_bin.com, port: 80}"), []v{{"spec.match[0].value", "must be a DNS name, or '*.' followed by a DNS name"}}},
		{"DomainTrailingDot", one("{type: Domain, value: httpbin.com., port: 80}"), []v{{"spec.match[0].value", "DNS name"}}},
		{"DomainIsAnIP", one("{type: Domain, value: 10.0.0.1, port: 80}"), []v{{"spec.match[0].value", "not an IP address: use type IP"}}},
		{"InternalVIPIsAnIP", one("{type: InternalVIP, value: '::1', port: 80}"), []v{{"spec.match[0].value", "not an IP address"}}},
		{"WildcardWithRegular", regular("{type: Domain, value: '*.example.com', port: 443, protocol: tls}"),
			[]v{{"spec.match[0].value", "a wildcard domain is allowed only when destination.type is Passthrough, got Regular"}}},
		{"WildcardWithExtension", extsvc("match:\n- {type: Domain, value: '*.example.com', port: 443}\ndestination:\n  type: Extension\n  extension: {type: Lambda}\n"),
			[]v{{"spec.match[0].value", "got Extension"}}},
		{"WildcardTwoLabels", one("{type: Domain, value: '*.*.example.com', port: 443}"), []v{{"spec.match[0].value", "a wildcard is a single leading label"}}},
		{"WildcardInside", one("{type: Domain, value: 'api.*.example.com', port: 443}"), []v{{"spec.match[0].value", "DNS name"}}},
		{"WildcardAlone", one("{type: Domain, value: '*', port: 443}"), []v{{"spec.match[0].value", "DNS name"}}},
		{"CIDRNotCanonical", one("{type: CIDR, value: 10.1.1.5/24, port: 80}"), []v{{"spec.match[0].value", "canonical form with the host bits zero: 10.1.1.0/24"}}},
		{"CIDRv6NotCanonical", one("{type: CIDR, value: '2001:db8::1/32', port: 80}"), []v{{"spec.match[0].value", "2001:db8::/32"}}},
		{"CIDRWithoutBits", one("{type: CIDR, value: 10.1.1.0, port: 80}"), []v{{"spec.match[0].value", "must be a CIDR"}}},
		{"CIDRBitsTooLarge", one("{type: CIDR, value: 10.1.1.0/33, port: 80}"), []v{{"spec.match[0].value", "must be a CIDR"}}},
		{"IPInvalid", one("{type: IP, value: 300.1.1.1, port: 80}"), []v{{"spec.match[0].value", "must be an IP address"}}},
		{"IPIsCIDR", one("{type: IP, value: 10.0.0.0/8, port: 80}"), []v{{"spec.match[0].value", "must be an IP address"}}},
		{"IPWithZone", one("{type: IP, value: 'fe80::1%eth0', port: 80}"), []v{{"spec.match[0].value", "without an IPv6 zone"}}},
		{"PortMissing", one("{type: IP, value: 1.1.1.1}"), []v{{"spec.match[0].port", "got 0"}}},
		{"PortTooHigh", one("{type: IP, value: 1.1.1.1, port: 65536}"), []v{{"spec.match[0].port", "got 65536"}}},
		{"ProtocolUnknown", one("{type: IP, value: 1.1.1.1, port: 53, protocol: udp}"), []v{{"spec.match[0].protocol", `must be one of "tls", "tcp", "grpc", "http", "http2", got "udp"`}}},
		// One cluster per port (seed 003 <name>_<port>), so one protocol per port.
		{"SamePortSameProtocol", extsvc("match:\n- {type: Domain, value: a.com, port: 443, protocol: tls}\n- {type: IP, value: 1.1.1.1, port: 443, protocol: TLS}\n"), nil},
		{"SamePortTwoProtocols", extsvc("match:\n- {type: Domain, value: a.com, port: 443, protocol: tls}\n- {type: IP, value: 1.1.1.1, port: 80, protocol: http}\n- {type: IP, value: 1.1.1.2, port: 443, protocol: http2}\n"),
			[]v{{"spec.match[2].protocol", "must be tls like spec.match[0], which uses the same port: a MeshExternalService has one cluster per port (<name>_443)"}}},
		{"SamePortDefaultTCPAndTLS", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 9092}\n- {type: Domain, value: a.com, port: 9092, protocol: tls}\n"),
			[]v{{"spec.match[1].protocol", "must be tcp like spec.match[0]"}}},
		{"SamePortBadProtocolReportedOnce", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 80, protocol: http}\n- {type: IP, value: 1.1.1.2, port: 80, protocol: udp}\n"),
			[]v{{"spec.match[1].protocol", `got "udp"`}}},
		{"Duplicate", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 80}\n- {type: IP, value: 1.1.1.2, port: 80}\n- {type: IP, value: 1.1.1.1, port: 80}\n"),
			[]v{{"spec.match[2]", "duplicates spec.match[0]: the same type, value and port"}}},
		{"SameValueOtherPort", extsvc("match:\n- {type: InternalVIP, value: db.ext.local, port: 5432}\n- {type: InternalVIP, value: db.ext.local, port: 5433}\n"), nil},
		{"SameValueOtherType", extsvc("match:\n- {type: InternalVIP, value: db.ext.local, port: 5432}\n- {type: Domain, value: db.ext.local, port: 5432}\n"), nil},
		{"EveryMatchReported", extsvc("match:\n- {type: IP, value: x, port: 80}\n- {type: CIDR, value: 1.2.3.4/8, port: 0}\n- {type: Domain, value: ok.com, port: 80, protocol: ftp}\n"),
			[]v{{"spec.match[0].value", ""}, {"spec.match[1].value", ""}, {"spec.match[1].port", ""}, {"spec.match[2].protocol", ""}}},
	})
}

func TestMeshExternalService_Destination(t *testing.T) {
	m := "match:\n- {type: IP, value: 1.1.1.1, port: 443}\n"
	runValidation(t, []validationCase{
		{"TypeUnknown", extsvc(m + "destination:\n  type: Direct\n"), []v{{"spec.destination.type", `must be one of "Regular", "Passthrough", "Extension", got "Direct"`}}},
		{"PassthroughForbidsEndpoints", extsvc(m + "destination:\n  type: Passthrough\n  endpoints: [{address: 1.1.1.1, port: 443}]\n"),
			[]v{{"spec.destination.endpoints", "must not be set when destination.type is Passthrough"}}},
		{"PassthroughForbidsEverything", extsvc(m + "destination:\n  endpoints: [{address: 1.1.1.1, port: 443}]\n  tls: {enabled: true}\n  extension: {type: Lambda}\n"),
			[]v{{"spec.destination.endpoints", "Passthrough"}, {"spec.destination.tls", "Passthrough"}, {"spec.destination.extension", "Passthrough"}}},
		{"ExtensionRequiresExtension", extsvc(m + "destination:\n  type: Extension\n"), []v{{"spec.destination.extension", "must be set when destination.type is Extension"}}},
		{"ExtensionForbidsEndpointsAndTLS", extsvc(m + "destination:\n  type: Extension\n  extension: {type: Lambda}\n  endpoints: [{address: 1.1.1.1, port: 443}]\n  tls: {}\n"),
			[]v{{"spec.destination.endpoints", "must not be set when destination.type is Extension"}, {"spec.destination.tls", "Extension"}}},
		{"ForbiddenSectionsCheckedInDetail", extsvc(m + "destination:\n  type: Passthrough\n  endpoints: [{address: 'not valid'}]\n  tls: {caCert: {}, version: {min: TLS9}}\n  extension: {}\n"),
			[]v{{"spec.destination.endpoints", "Passthrough"}, {"spec.destination.tls", "Passthrough"}, {"spec.destination.extension", "Passthrough"},
				{"spec.destination.endpoints[0].address", ""}, {"spec.destination.endpoints[0].port", ""},
				{"spec.destination.tls.caCert", "exactly one"}, {"spec.destination.tls.version.min", ""}, {"spec.destination.extension.type", ""}}},
		{"UnknownTypeChecksEverySection", extsvc(m + "destination:\n  type: Direct\n  endpoints: [{address: 'not valid', port: 1}]\n  tls: {caCert: {}}\n  extension: {}\n"),
			[]v{{"spec.destination.type", ""}, {"spec.destination.endpoints[0].address", ""}, {"spec.destination.tls.caCert", ""}, {"spec.destination.extension.type", ""}}},
		{"ExtensionTypeEmpty", extsvc(m + "destination:\n  type: Extension\n  extension: {config: {a: 1}}\n"), []v{{"spec.destination.extension.type", "must not be empty"}}},
		{"ExtensionConfigNotObject", extsvc(m + "destination:\n  type: Extension\n  extension: {type: Lambda, config: [1, 2]}\n"), []v{{"spec.destination.extension.config", "must be a JSON object"}}},
		{"RegularForbidsExtension", extsvc(m + "destination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n  extension: {type: Lambda}\n"),
			[]v{{"spec.destination.extension", "must not be set when destination.type is Regular"}}},
		{"RegularRequiresEndpoints", extsvc(m + "destination:\n  type: Regular\n"), []v{{"spec.destination.endpoints", "must have at least one entry when destination.type is Regular"}}},
		{"RegularEmptyEndpoints", extsvc(m + "destination:\n  type: Regular\n  endpoints: []\n"), []v{{"spec.destination.endpoints", "at least one entry"}}},
	})
}

func TestMeshExternalService_Endpoints(t *testing.T) {
	eps := func(e string) string {
		return extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints:\n  - " + e + "\n")
	}
	var many strings.Builder
	for i := range MaxEndpoints + 1 {
		fmt.Fprintf(&many, "\n  - {address: 10.1.%d.%d, port: 80}", i/256, i%256)
	}
	runValidation(t, []validationCase{
		{"AddressEmpty", eps("{port: 80}"), []v{{"spec.destination.endpoints[0].address", "must not be empty"}}},
		{"AddressInvalid", eps("{address: 'not a host!', port: 80}"), []v{{"spec.destination.endpoints[0].address", "must be an IP address, a DNS name or unix://"}}},
		{"AddressBadIP", eps("{address: 10.0.0.256, port: 80}"), []v{{"spec.destination.endpoints[0].address", "must be an IP address"}}},
		{"IPWithoutPort", eps("{address: 10.0.0.1}"), []v{{"spec.destination.endpoints[0].port", "must be set for an IP or DNS name address"}}},
		{"DomainPortTooHigh", eps("{address: example.com, port: 65536}"), []v{{"spec.destination.endpoints[0].port", "got 65536"}}},
		{"UnixRelativePath", eps("{address: 'unix://run/app.sock'}"), []v{{"spec.destination.endpoints[0].address", "absolute path"}}},
		{"UnixEmptyPath", eps("{address: 'unix://'}"), []v{{"spec.destination.endpoints[0].address", "absolute path"}}},
		{"UnixWithPort", eps("{address: 'unix:///run/app.sock', port: 80}"), []v{{"spec.destination.endpoints[0].port", "must not be set for a unix socket address"}}},
		{"TooMany", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints:" + many.String() + "\n"),
			[]v{{"spec.destination.endpoints", "at most 1000 entries, got 1001"}}},
	})
}

func TestMeshExternalService_TLS(t *testing.T) {
	tls := func(body string) string {
		var b strings.Builder
		b.WriteString("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n  tls:\n")
		for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
			b.WriteString("    " + l + "\n")
		}
		return extsvc(b.String())
	}
	var sans strings.Builder
	for range MaxSubjectAltNames + 1 {
		sans.WriteString("  - a.com\n")
	}
	runValidation(t, []validationCase{
		{"MinUnknown", tls("version: {min: TLS12}\n"), []v{{"spec.destination.tls.version.min", `must be one of "TLS_AUTO", "TLSv1_0", "TLSv1_1", "TLSv1_2", "TLSv1_3", got "TLS12"`}}},
		{"MaxUnknown", tls("version: {max: TLSv1_4}\n"), []v{{"spec.destination.tls.version.max", `got "TLSv1_4"`}}},
		{"MinAboveMax", tls("version: {min: TLSv1_3, max: TLSv1_2}\n"), []v{{"spec.destination.tls.version.min", "must not be above max: TLSv1_3 is newer than TLSv1_2"}}},
		{"BothUnknownNoComparison", tls("version: {min: a, max: b}\n"), []v{{"spec.destination.tls.version.min", ""}, {"spec.destination.tls.version.max", ""}}},
		{"SubjectAltNameEmpty", tls("verification:\n  subjectAltNames: [a.com, '']\n"), []v{{"spec.destination.tls.verification.subjectAltNames[1]", "must not be empty"}}},
		{"TooManySubjectAltNames", tls("verification:\n  subjectAltNames:\n" + sans.String()), []v{{"spec.destination.tls.verification.subjectAltNames", "at most 64 entries, got 65"}}},
		{"DataSourceEmpty", tls("caCert: {}\n"), []v{{"spec.destination.tls.caCert", "must set exactly one of inline, inlineString or secret, got 0"}}},
		{"DataSourceTwo", tls(withTLS("caCert: {inline: $CA, secret: ca}\n")), []v{{"spec.destination.tls.caCert", "got 2"}}},
		{"DataSourceBadBase64", tls("caCert: {inline: 'not base64!'}\n"), []v{{"spec.destination.tls.caCert.inline", "must be base64-encoded data"}}},
		{"DataSourceEmptyInline", tls("caCert: {inline: ''}\n"), []v{{"spec.destination.tls.caCert.inline", "must not be empty"}}},
		{"DataSourceEmptyInlineString", tls("caCert: {inlineString: ''}\n"), []v{{"spec.destination.tls.caCert.inlineString", "must not be empty"}}},
		{"DataSourceEmptySecret", tls("caCert: {secret: ''}\n"), []v{{"spec.destination.tls.caCert.secret", "the name of a secret"}}},
		{"ClientCertWithoutKey", tls("clientCert: {secret: cert}\n"), []v{{"spec.destination.tls.clientKey", "must be set when clientCert is set"}}},
		{"ClientKeyWithoutCert", tls("clientKey: {secret: key}\n"), []v{{"spec.destination.tls.clientCert", "must be set when clientKey is set"}}},
		{"EveryDataSourceReported", tls("caCert: {}\nclientCert: {secret: ''}\nclientKey: {inline: '%%%'}\n"),
			[]v{{"spec.destination.tls.caCert", ""}, {"spec.destination.tls.clientCert.secret", ""}, {"spec.destination.tls.clientKey.inline", ""}}},
	})
}

func TestMeshExternalService_ReportsAllViolations(t *testing.T) {
	got := validateDoc(t, extsvc(`
match:
- type: Domain
  value: '*.example.com'
  port: 0
destination:
  type: Regular
  tls:
    clientCert: {secret: cert}
`))
	checkViolations(t, got, []v{
		{"spec.match[0].value", "wildcard"},
		{"spec.match[0].port", ""},
		{"spec.destination.endpoints", "at least one"},
		{"spec.destination.tls.clientKey", ""},
	})
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // parts of each warning, in order
	}{
		{"TCPWithOnlyDomains", extsvc("match:\n- {type: Domain, value: kafka.example.com, port: 9092, protocol: tcp}\n"),
			[]string{"spec.match[0].protocol: tcp cannot tell domains apart, so this match captures all traffic to port 9092, not only kafka.example.com"}},
		{"DefaultProtocolIsTCP", extsvc("match:\n- {type: Domain, value: a.com, port: 80}\n- {type: Domain, value: b.com, port: 80, protocol: tls}\n"),
			[]string{"spec.match[0].protocol: ", "port 80"}},
		{"TCPWithAnIPOnThePort", extsvc("match:\n- {type: Domain, value: a.com, port: 80}\n- {type: IP, value: 1.1.1.1, port: 80}\n"), nil},
		{"OtherPortHasOnlyDomains", extsvc("match:\n- {type: Domain, value: a.com, port: 80}\n- {type: IP, value: 1.1.1.1, port: 443}\n"),
			[]string{"spec.match[0].protocol: "}},
		{"TCPOnInternalVIP", extsvc("match:\n- {type: InternalVIP, value: mongo.ext, port: 27017, protocol: tcp}\n"), nil},
		{"TLSDomains", extsvc("match:\n- {type: Domain, value: a.com, port: 443, protocol: tls}\n"), nil},
		{"NotAnExternalService", msvc("{}"), nil},
		{"SkipWithSubjectAltNames", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n" +
			"  tls:\n    verification: {skip: true, subjectAltNames: [a.com]}\n"),
			[]string{"spec.destination.tls.verification.subjectAltNames: not checked, because verification.skip is true"}},
		{"VerifiedSubjectAltNames", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n" +
			"  tls:\n    verification: {subjectAltNames: [a.com]}\n"), nil},
		{"SecretNotServed", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n" +
			"  tls:\n    enabled: true\n    caCert: {secret: ca}\n"),
			[]string{"spec.destination.tls.caCert.secret: meshnames keeps no secrets, so proxies are not sent this service"}},
		{"SecretWithTLSOff", extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n" +
			"  tls:\n    caCert: {secret: ca}\n"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Warnings(decodeDefault(t, tt.doc))
			if len(tt.want) == 0 {
				if len(got) != 0 {
					t.Fatalf("Warnings = %q, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("Warnings = %q, want one", got)
			}
			for _, part := range tt.want {
				if !strings.Contains(got[0], part) {
					t.Errorf("warning %q does not contain %q", got[0], part)
				}
			}
		})
	}
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

// ---- Decode ----

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
