package apiserver

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// TestExternalService_UnreadableTLSData: a MeshExternalService whose TLS
// data a proxy could not load is refused 400 at write time, with the
// field that holds the data, no quote of it, and the stored service left
// as it was.
func TestExternalService_UnreadableTLSData(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	doc := func(tls string) string {
		return "type: MeshExternalService\nmesh: default\nname: api\nspec:\n  match:\n  - {type: Domain, value: api.example.com, port: 443, protocol: tls}\n" +
			"  destination:\n    type: Regular\n    endpoints: [{address: api.example.com, port: 443}]\n    tls:\n      enabled: true\n" + tls
	}
	good := doc("      caCert: {inlineString: " + strconv.Quote(storetest.CACertPEM) + "}\n")
	if r := e.put("/meshes/default/meshexternalservices/api", good); r.code != http.StatusCreated {
		t.Fatalf("PUT the good service = %d: %s", r.code, r.body)
	}
	before, err := e.st.Get(context.Background(), resource.Key{Kind: resource.MeshExternalService, Mesh: "default", Name: "api"})
	if err != nil {
		t.Fatal(err)
	}
	const marker = "QUOTEDDATA"
	// A valid EC key that is not the key of storetest.CACertPEM.
	const otherKey = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIDsZZOBIXCCPJ/cA5V7yyiaTK9WHo7M3gIGxV1m+rTDPoAoGCCqGSM49\nAwEHoUQDQgAEGYSgeH2WRn7pHgdLn3SQyFFYb6U5GHgOHAyi6QrbJSHkf/t6VjVt\nhkaRdiuv/8ucmsL0VGbuFowr+6+OeqtdZQ==\n-----END EC PRIVATE KEY-----\n"
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name, tls string
		fields    []string
	}{
		{"bad-base64", "      caCert: {inline: '" + marker + "%%'}\n", []string{"spec.destination.tls.caCert.inline"}},
		{"not-pem", "      caCert: {inline: " + b64(marker) + "}\n", []string{"spec.destination.tls.caCert.inline"}},
		{"pem-that-does-not-parse", "      caCert: {inlineString: \"-----BEGIN CERTIFICATE-----\\n" + b64(marker) + "\\n-----END CERTIFICATE-----\\n\"}\n",
			[]string{"spec.destination.tls.caCert.inlineString"}},
		{"key-that-does-not-parse", "      clientCert: {inlineString: " + strconv.Quote(storetest.CACertPEM) + "}\n" +
			"      clientKey: {inlineString: \"-----BEGIN PRIVATE KEY-----\\n" + b64(marker) + "\\n-----END PRIVATE KEY-----\\n\"}\n",
			[]string{"spec.destination.tls.clientKey.inlineString"}},
		{"bad-server-name", "      verification: {serverName: 'not a name'}\n", []string{"spec.destination.tls.verification.serverName"}},
		{"no-source", "      caCert: {}\n", []string{"spec.destination.tls.caCert"}},
		{"two-sources", "      caCert: {inline: " + b64(storetest.CACertPEM) + ", secret: ca}\n", []string{"spec.destination.tls.caCert"}},
		{"key-without-cert", "      clientKey: {inlineString: " + strconv.Quote(otherKey) + "}\n", []string{"spec.destination.tls.clientCert"}},
		{"key-of-another-cert", "      clientCert: {inlineString: " + strconv.Quote(storetest.CACertPEM) + "}\n" +
			"      clientKey: {inlineString: " + strconv.Quote(otherKey) + "}\n", []string{"spec.destination.tls.clientKey"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.put("/meshes/default/meshexternalservices/api", doc(tt.tls))
			if r.code != http.StatusBadRequest {
				t.Fatalf("PUT = %d, want 400: %s", r.code, r.body)
			}
			want := slices.Clone(tt.fields)
			slices.Sort(want)
			if d := cmp.Diff(want, r.causeFields()); d != "" {
				t.Errorf("cause fields (-want +got):\n%s\nbody: %s", d, r.body)
			}
			if strings.Contains(string(r.body), marker) || strings.Contains(string(r.body), b64(marker)) || strings.Contains(string(r.body), "MHcCAQEE") {
				t.Errorf("the answer quotes the data: %s", r.body)
			}
			for _, c := range r.error().Causes {
				if c.Message == "" {
					t.Errorf("cause %s without a message", c.Field)
				}
			}
		})
	}
	after, err := e.st.Get(context.Background(), before.Key())
	if err != nil || after.Version != before.Version {
		t.Errorf("the refused writes changed the stored service: version %d -> %d (%v)", before.Version, after.Version, err)
	}
}
