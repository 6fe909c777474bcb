package resource

import (
	"fmt"
	"strings"
	"testing"
)

// This file tests the validation of MeshExternalServices (seed 003) and
// the Warnings about valid ones.

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
