package zonesync

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"time"

	"github.com/meshnames/meshnames/internal/store"
)

// Fingerprint is the pin of a certificate: "sha256:" and the hex SHA-256
// of its DER encoding. A zone token carries the fingerprint of the
// global's sync certificate, so that a zone verifies the global with no
// other file (kubeadm's discovery hash).
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// syncCertValidity is how long the sync certificate created at first start
// is valid. Zones pin it rather than trust a CA, so renewing it means new
// zone tokens; ten years keeps that a deliberate act.
const syncCertValidity = 10 * 365 * 24 * time.Hour

// tlsMaterial is the lease value of the global's sync key and certificate.
type tlsMaterial struct {
	Cert []byte `json:"cert"` // PEM
	Key  []byte `json:"key"`  // PEM
}

// GlobalTLS is the certificate the global's sync server presents.
type GlobalTLS struct {
	Cert tls.Certificate
	// Pin is the fingerprint of the certificate (Fingerprint).
	Pin string
	// Created is true when this call created the certificate (first start).
	Created bool
}

// LoadGlobalTLS returns the global's sync certificate: the files certFile
// and keyFile when given, otherwise the key and certificate kept in the
// store, created at first start and shared by every instance of the global
// on one PostgreSQL database.
func LoadGlobalTLS(ctx context.Context, st store.Store, certFile, keyFile string) (*GlobalTLS, error) {
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, errors.New("the sync certificate and key must be given together")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load the sync certificate: %w", err)
		}
		return &GlobalTLS{Cert: cert, Pin: Fingerprint(cert.Certificate[0])}, nil
	}
	v, created, err := ensureLease(ctx, st, leaseTLS, func() ([]byte, error) {
		m, err := newSyncCert(time.Now())
		if err != nil {
			return nil, err
		}
		return json.Marshal(m)
	})
	if err != nil {
		return nil, fmt.Errorf("the sync certificate: %w", err)
	}
	var m tlsMaterial
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, fmt.Errorf("the sync certificate in the store: %w", err)
	}
	cert, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, fmt.Errorf("the sync certificate in the store: %w", err)
	}
	return &GlobalTLS{Cert: cert, Pin: Fingerprint(cert.Certificate[0]), Created: created}, nil
}

// newSyncCert creates a self-signed ECDSA P-256 certificate (small enough
// for a lease).
func newSyncCert(now time.Time) (tlsMaterial, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tlsMaterial{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tlsMaterial{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "meshnames global sync"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(syncCertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tlsMaterial{}, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tlsMaterial{}, err
	}
	return tlsMaterial{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
	}, nil
}

// zoneTLS is how a zone verifies the global: against caFile (the
// certificate chain and serverName) when given, otherwise by the pin of
// its zone token.
func zoneTLS(pin, caFile, serverName string) (*tls.Config, error) {
	if caFile != "" {
		pemBytes, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read the global's CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
		}
		// The chain is verified as crypto/tls would, but in
		// VerifyConnection, where every reason not to trust the global
		// is reported (the zone tells them from a network failure).
		return &tls.Config{
			MinVersion:         tls.VersionTLS12,
			ServerName:         serverName,
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("the global presented no certificate")
				}
				inter := x509.NewCertPool()
				for _, c := range cs.PeerCertificates[1:] {
					inter.AddCert(c)
				}
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: serverName})
				if err != nil {
					return fmt.Errorf("the global's sync certificate is not trusted by %s: %w", caFile, err)
				}
				return nil
			},
		}, nil
	}
	if pin == "" {
		return nil, errors.New("the zone token carries no pin of the global's sync certificate, and no --global-ca-file is given")
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is not verified against a CA: the pin is the trust.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the global presented no certificate")
			}
			if got := Fingerprint(cs.PeerCertificates[0].Raw); got != pin {
				return fmt.Errorf("the global's sync certificate (%s) does not match the pin in the zone token (%s): wrong global, or the token is for another global", got, pin)
			}
			return nil
		},
	}, nil
}
