package zonesync

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCert makes a certificate for dnsName signed by parent (self-signed
// when nil), with isCA saying whether it may sign others.
func testCert(t *testing.T, dnsName string, isCA bool, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: isCA, BasicConstraintsValid: true, DNSNames: []string{dnsName},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

// TestZoneTLS_VerifiesTheGlobal: by pin or by CA, a global whose
// certificate is not the trusted one fails in VerifyConnection, with an
// error that says why (the zone reports it as a refusal, not as a network
// failure).
func TestZoneTLS_VerifiesTheGlobal(t *testing.T) {
	ca, caKey := testCert(t, "ca", true, nil, nil)
	other, otherKey := testCert(t, "other-ca", true, nil, nil)
	good, _ := testCert(t, "global.example", false, ca, caKey)
	forged, _ := testCert(t, "global.example", false, other, otherKey)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, pin, caFile, host string
		peer                    *x509.Certificate
		want                    string // "" for trusted
	}{
		{name: "pin-match", pin: Fingerprint(good.Raw), peer: good},
		{name: "pin-mismatch", pin: Fingerprint(forged.Raw), peer: good, want: "does not match the pin in the zone token"},
		{name: "ca-match", caFile: caFile, host: "global.example", peer: good},
		{name: "ca-other-issuer", caFile: caFile, host: "global.example", peer: forged, want: "is not trusted by " + caFile},
		{name: "ca-wrong-host", caFile: caFile, host: "elsewhere.example", peer: good, want: "is not trusted by " + caFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := zoneTLS(tc.pin, tc.caFile, tc.host)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{tc.peer}})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused a trusted global: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}
