package resource

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"slices"

	"github.com/meshnames/meshnames/internal/validate"
)

// This file checks a MeshExternalService's TLS origination section
// (seed 003, destination.tls): versions, verification, and the
// certificates and key it carries, which must be what a proxy can load.
// Messages never quote the data: a key must not reach a log or an answer.

func checkTLS(errs *validate.Errors, p validate.Path, t *ExternalTLS) {
	if v := t.Version; v != nil {
		vp := p.Field("version")
		minOK, maxOK := true, true
		if v.Min != "" {
			msg := validate.OneOf(v.Min, tlsVersions...)
			errs.Check(vp.Field("min"), msg)
			minOK = msg == ""
		}
		if v.Max != "" {
			msg := validate.OneOf(v.Max, tlsVersions...)
			errs.Check(vp.Field("max"), msg)
			maxOK = msg == ""
		}
		// TLS_AUTO sorts first, so it takes part in no comparison; the
		// specific versions are listed in order.
		if minOK && maxOK && v.Min != "" && v.Max != "" && v.Min != TLSAuto && v.Max != TLSAuto &&
			slices.Index(tlsVersions, v.Min) > slices.Index(tlsVersions, v.Max) {
			errs.Addf(vp.Field("min"), "must not be above max: %s is newer than %s", v.Min, v.Max)
		}
	}
	if v := t.Verification; v != nil {
		vp := p.Field("verification")
		if v.ServerName != "" {
			if msg := validate.DNS1123Subdomain(v.ServerName); msg != "" {
				errs.Add(vp.Field("serverName"), "must be a DNS name, the server name the proxy sends (SNI): "+msg)
			}
		}
		sp := vp.Field("subjectAltNames")
		if checkCount(errs, sp, len(v.SubjectAltNames), MaxSubjectAltNames) {
			for i, san := range v.SubjectAltNames {
				if san == "" {
					errs.Add(sp.Index(i), "must not be empty")
				}
			}
		}
	}
	checkDataSource(errs, p.Field("caCert"), t.CACert, pemCertificates)
	cert := checkDataSource(errs, p.Field("clientCert"), t.ClientCert, pemCertificates)
	key := checkDataSource(errs, p.Field("clientKey"), t.ClientKey, pemPrivateKey)
	// A client certificate is useless without its key, and the reverse.
	if t.ClientCert != nil && t.ClientKey == nil {
		errs.Add(p.Field("clientKey"), "must be set when clientCert is set")
	}
	if t.ClientKey != nil && t.ClientCert == nil {
		errs.Add(p.Field("clientCert"), "must be set when clientKey is set")
	}
	if cert != nil && key != nil {
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			errs.Addf(p.Field("clientKey"), "must be the private key of clientCert: %v", err)
		}
	}
}

// checkDataSource checks a certificate or key given inline (base64), as an
// inline string, or as the name of a secret: exactly one of them. Inline
// data must be what parse accepts; it is returned when it is.
func checkDataSource(errs *validate.Errors, p validate.Path, d *DataSource, parse func([]byte) string) []byte {
	if d == nil {
		return nil
	}
	n := 0
	var data []byte
	if d.Inline != nil {
		n++
		switch b, err := base64.StdEncoding.DecodeString(*d.Inline); {
		case err != nil:
			errs.Addf(p.Field("inline"), "must be base64-encoded data: %v", err)
		case len(b) == 0:
			errs.Add(p.Field("inline"), "must not be empty")
		default:
			if msg := parse(b); msg != "" {
				errs.Add(p.Field("inline"), "must be base64 of "+msg)
			} else {
				data = b
			}
		}
	}
	if d.InlineString != nil {
		n++
		if *d.InlineString == "" {
			errs.Add(p.Field("inlineString"), "must not be empty")
		} else if msg := parse([]byte(*d.InlineString)); msg != "" {
			errs.Add(p.Field("inlineString"), "must be "+msg)
		} else {
			data = []byte(*d.InlineString)
		}
	}
	if d.Secret != nil {
		n++
		if *d.Secret == "" {
			errs.Add(p.Field("secret"), "must not be empty: the name of a secret")
		}
	}
	if n != 1 {
		errs.Addf(p, "must set exactly one of inline, inlineString or secret, got %d", n)
		return nil
	}
	return data
}

// pemCertificates checks that b holds one or more PEM certificates and
// nothing else a proxy would stumble on; it returns what is wrong, to
// follow "must be".
func pemCertificates(b []byte) string {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		n++
		if blk.Type != "CERTIFICATE" {
			return fmt.Sprintf("PEM certificates (-----BEGIN CERTIFICATE-----): PEM block %d is a %q", n, blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Sprintf("PEM certificates: certificate %d does not parse: %v", n, err)
		}
	}
	if n == 0 {
		return "PEM certificates (-----BEGIN CERTIFICATE-----): found no PEM block"
	}
	return ""
}

// pemPrivateKey checks that b holds one PEM private key: PKCS #1 (RSA),
// SEC 1 (EC) or PKCS #8.
func pemPrivateKey(b []byte) string {
	const want = "a PEM private key (PKCS #1, SEC 1 or PKCS #8)"
	blk, rest := pem.Decode(b)
	if blk == nil {
		return want + ": found no PEM block"
	}
	if more, _ := pem.Decode(rest); more != nil {
		return want + ": found more than one PEM block"
	}
	var err error
	switch blk.Type {
	case "RSA PRIVATE KEY":
		_, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		_, err = x509.ParseECPrivateKey(blk.Bytes)
	case "PRIVATE KEY":
		_, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	default:
		return fmt.Sprintf("%s: the PEM block is a %q", want, blk.Type)
	}
	if err != nil {
		// The parsers' errors describe the key's structure: not shown.
		return fmt.Sprintf("%s: the %s block does not parse as one", want, blk.Type)
	}
	return ""
}
