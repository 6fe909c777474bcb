package resource

import (
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The test certificates of testdata/tls, as text.
var testCA, testClientCert, testClientKey = readTLS("ca.crt"), readTLS("client.crt"), readTLS("client.key")

func readTLS(name string) string {
	b, err := os.ReadFile("testdata/tls/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// withTLS replaces $CA, $CERT and $KEY in a YAML document with the test
// certificates, base64 (for inline), and $CA_STRING, $CERT_STRING and
// $KEY_STRING with them as quoted strings (for inlineString).
func withTLS(doc string) string {
	return strings.NewReplacer(
		"$CA_STRING", strconv.Quote(testCA), "$CERT_STRING", strconv.Quote(testClientCert), "$KEY_STRING", strconv.Quote(testClientKey),
		"$CA", b64(testCA), "$CERT", b64(testClientCert), "$KEY", b64(testClientKey),
	).Replace(doc)
}

func TestMeshExternalService_TLSData(t *testing.T) {
	tls := func(body string) string {
		return withTLS(extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n  tls:\n    enabled: true\n" + body))
	}
	otherKey := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIDsZZOBIXCCPJ/cA5V7yyiaTK9WHo7M3gIGxV1m+rTDPoAoGCCqGSM49\nAwEHoUQDQgAEGYSgeH2WRn7pHgdLn3SQyFFYb6U5GHgOHAyi6QrbJSHkf/t6VjVt\nhkaRdiuv/8ucmsL0VGbuFowr+6+OeqtdZQ==\n-----END EC PRIVATE KEY-----\n"
	runValidation(t, []validationCase{
		{"Inline", tls("    caCert: {inline: $CA}\n    clientCert: {inline: $CERT}\n    clientKey: {inline: $KEY}\n"), nil},
		{"InlineString", tls("    caCert: {inlineString: $CA_STRING}\n    clientCert: {inlineString: $CERT_STRING}\n    clientKey: {inlineString: $KEY_STRING}\n"), nil},
		{"ChainInOneSource", tls("    caCert: {inlineString: " + strconv.Quote(testClientCert+testCA) + "}\n"), nil},
		{"ServerName", tls("    verification: {serverName: api.example.com}\n"), nil},
		{"ServerNameNotDNS", tls("    verification: {serverName: 'API_Example'}\n"),
			[]v{{"spec.destination.tls.verification.serverName", "must be a DNS name, the server name the proxy sends (SNI)"}}},
		{"NotPEM", tls("    caCert: {inline: " + b64("just text") + "}\n"),
			[]v{{"spec.destination.tls.caCert.inline", "must be base64 of PEM certificates (-----BEGIN CERTIFICATE-----): found no PEM block"}}},
		{"CertificateDoesNotParse", tls("    caCert: {inlineString: \"-----BEGIN CERTIFICATE-----\\naGVsbG8=\\n-----END CERTIFICATE-----\\n\"}\n"),
			[]v{{"spec.destination.tls.caCert.inlineString", "must be PEM certificates: certificate 1 does not parse: x509: "}}},
		{"KeyWhereCertificate", tls("    clientCert: {inline: $KEY}\n    clientKey: {inline: $KEY}\n"),
			[]v{{"spec.destination.tls.clientCert.inline", `PEM block 1 is a "EC PRIVATE KEY"`}}},
		{"CertificateWhereKey", tls("    clientCert: {inline: $CERT}\n    clientKey: {inline: $CERT}\n"),
			[]v{{"spec.destination.tls.clientKey.inline", `must be base64 of a PEM private key (PKCS #1, SEC 1 or PKCS #8): the PEM block is a "CERTIFICATE"`}}},
		{"KeyDoesNotParse", tls("    clientCert: {inline: $CERT}\n    clientKey: {inlineString: \"-----BEGIN PRIVATE KEY-----\\naGVsbG8=\\n-----END PRIVATE KEY-----\\n\"}\n"),
			[]v{{"spec.destination.tls.clientKey.inlineString", "the PRIVATE KEY block does not parse as one"}}},
		{"TwoKeys", tls("    clientCert: {inline: $CERT}\n    clientKey: {inline: " + b64(testClientKey+otherKey) + "}\n"),
			[]v{{"spec.destination.tls.clientKey.inline", "found more than one PEM block"}}},
		{"KeyOfAnotherCertificate", tls("    clientCert: {inline: $CERT}\n    clientKey: {inlineString: " + strconv.Quote(otherKey) + "}\n"),
			[]v{{"spec.destination.tls.clientKey", "must be the private key of clientCert: tls: private key does not match public key"}}},
	})
}

// TestMeshExternalService_TLSDataNotQuoted checks that no message quotes
// the data it refuses: a key must not reach an answer or a log.
func TestMeshExternalService_TLSDataNotQuoted(t *testing.T) {
	const marker = "SECRETMARKER"
	for _, src := range []string{
		"{inlineString: " + marker + "}",
		"{inline: " + b64(marker) + "}",
		"{inlineString: \"-----BEGIN PRIVATE KEY-----\\n" + marker + "\\n-----END PRIVATE KEY-----\\n\"}",
		"{inlineString: \"-----BEGIN CERTIFICATE-----\\n" + marker + "\\n-----END CERTIFICATE-----\\n\"}",
	} {
		doc := extsvc("match:\n- {type: IP, value: 1.1.1.1, port: 443}\ndestination:\n  type: Regular\n  endpoints: [{address: 1.1.1.1, port: 443}]\n  tls:\n" +
			"    caCert: " + src + "\n    clientCert: " + src + "\n    clientKey: " + src + "\n")
		errs := validateDoc(t, doc)
		if len(errs) == 0 {
			t.Fatalf("%s: accepted", src)
		}
		if strings.Contains(errs.Error(), marker) || strings.Contains(errs.Error(), b64(marker)) {
			t.Errorf("%s: the violations quote the data: %v", src, errs)
		}
	}
}

func TestDataSource_Data(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tt := range []struct {
		name string
		d    *DataSource
		want string
		ok   bool
	}{
		{"Nil", nil, "", false},
		{"Inline", &DataSource{Inline: s(b64("pem"))}, "pem", true},
		{"InlineBad", &DataSource{Inline: s("%%%")}, "", false},
		{"InlineString", &DataSource{InlineString: s("pem")}, "pem", true},
		{"Secret", &DataSource{Secret: s("ca")}, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.d.Data()
			if string(got) != tt.want || ok != tt.ok {
				t.Errorf("Data() = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
