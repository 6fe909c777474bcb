package xds

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/meshnames/meshnames/internal/resource"
)

// pki is a test CA and what it signed.
type pki struct {
	t      *testing.T
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

func newPKI(t *testing.T) *pki {
	p := &pki{t: t}
	p.ca, p.caKey = p.sign(&x509.Certificate{Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Raw})
	return p
}

func (p *pki) sign(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serial++
	tmpl.SerialNumber = big.NewInt(p.serial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	tmpl.BasicConstraintsValid = true
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		p.t.Fatal(err)
	}
	return c, key
}

// leaf returns a certificate and key signed by the CA, as PEM, for the
// given DNS names (a server) or none (a client).
func (p *pki) leaf(usage x509.ExtKeyUsage, dnsNames ...string) (certPEM, keyPEM []byte) {
	p.t.Helper()
	c, key := p.sign(&x509.Certificate{Subject: pkix.Name{CommonName: "leaf"}, DNSNames: dnsNames,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}, p.ca, p.caKey)
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// startTLSBackend is a real gRPC server with a certificate for dnsName
// from p's CA, which requires a client certificate from the same CA and
// TLS 1.2 or newer.
func startTLSBackend(t *testing.T, p *pki, id, dnsName string) *backend {
	t.Helper()
	certPEM, keyPEM := p.leaf(x509.ExtKeyUsageServerAuth, dnsName)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12,
	})))
	b := &backend{id: id, port: ln.Addr().(*net.TCPAddr).Port}
	testgrpc.RegisterTestServiceServer(g, b)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return b
}

// fetch asks the env's ADS server, as a state-of-the-world client of
// node, for names of typeURL (every one when none) and returns the first
// response's resources.
func fetch(t *testing.T, e *env, node, typeURL string, names ...string) []proto.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := dialADS(t, e.addr).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: typeURL, ResourceNames: names}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var out []proto.Message
	for _, a := range r.GetResources() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// served waits until node gets a cluster named name for which ok holds,
// and returns it.
func served(t *testing.T, e *env, node, name string, ok func(*clusterv3.Cluster) bool) *clusterv3.Cluster {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, m := range fetch(t, e, node, ClusterURL) {
			if c := m.(*clusterv3.Cluster); c.GetName() == name && ok(c) {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster %s as wanted", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// clientTLS is what a client makes of a cluster's UpstreamTlsContext
// and the secrets it names, fetched by SDS: the server name (SNI), the
// version range, the CA of the validation context, the client
// certificate, and the subject alt names the server's certificate must
// hold.
func clientTLS(t *testing.T, e *env, node string, c *clusterv3.Cluster) *tls.Config {
	t.Helper()
	var up tlsv3.UpstreamTlsContext
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&up); err != nil {
		t.Fatalf("cluster %s: transport socket: %v", c.GetName(), err)
	}
	common := up.GetCommonTlsContext()
	cfg := &tls.Config{
		ServerName: up.GetSni(),
		MinVersion: goTLSVersion(common.GetTlsParams().GetTlsMinimumProtocolVersion()),
		MaxVersion: goTLSVersion(common.GetTlsParams().GetTlsMaximumProtocolVersion()),
	}
	secrets := map[string]*tlsv3.Secret{}
	var names []string
	for _, s := range common.GetTlsCertificateSdsSecretConfigs() {
		names = append(names, s.GetName())
	}
	combined := common.GetCombinedValidationContext()
	names = append(names, combined.GetValidationContextSdsSecretConfig().GetName())
	for _, m := range fetch(t, e, node, SecretURL, names...) {
		s := m.(*tlsv3.Secret)
		secrets[s.GetName()] = s
	}
	for _, s := range common.GetTlsCertificateSdsSecretConfigs() {
		tc := secrets[s.GetName()].GetTlsCertificate()
		cert, err := tls.X509KeyPair(tc.GetCertificateChain().GetInlineBytes(), tc.GetPrivateKey().GetInlineBytes())
		if err != nil {
			t.Fatalf("secret %s: %v", s.GetName(), err)
		}
		cfg.Certificates = append(cfg.Certificates, cert)
	}
	ca := secrets[combined.GetValidationContextSdsSecretConfig().GetName()].GetValidationContext().GetTrustedCa().GetInlineBytes()
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(ca) {
		t.Fatalf("the CA secret holds no certificate")
	}
	sans := combined.GetDefaultValidationContext().GetMatchTypedSubjectAltNames()
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		for _, m := range sans {
			if m.GetSanType() == tlsv3.SubjectAltNameMatcher_DNS && cs.PeerCertificates[0].VerifyHostname(m.GetMatcher().GetExact()) == nil {
				return nil
			}
		}
		return fmt.Errorf("the server's certificate holds none of the subject alt names %v", sans)
	}
	return cfg
}

func goTLSVersion(v tlsv3.TlsParameters_TlsProtocol) uint16 {
	return map[tlsv3.TlsParameters_TlsProtocol]uint16{
		tlsv3.TlsParameters_TLSv1_0: tls.VersionTLS10, tlsv3.TlsParameters_TLSv1_1: tls.VersionTLS11,
		tlsv3.TlsParameters_TLSv1_2: tls.VersionTLS12, tlsv3.TlsParameters_TLSv1_3: tls.VersionTLS13,
	}[v]
}

// TestExternalService_TLSOriginationHandshakes is issue 47's test of TLS
// origination: a MeshExternalService with a Regular destination and TLS
// in front of a real gRPC server whose certificate (and the client
// certificate it requires) come from a test CA. The cluster served over
// ADS carries the SNI, the version range and, by SDS, the CA and the
// client certificate; a gRPC client configured from them alone completes
// the handshake and a call. A serverName the server's certificate does
// not hold is sent as the SNI and fails the handshake.
func TestExternalService_TLSOriginationHandshakes(t *testing.T) {
	e := newEnv(t, nil)
	p := newPKI(t)
	b := startTLSBackend(t, p, "external", "api.example.com")
	certPEM, keyPEM := p.leaf(x509.ExtKeyUsageClientAuth)
	e.dataplane("caller", "caller", 9999)
	str := func(b []byte) *string { s := string(b); return &s }
	mes := e.create(&resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: "api", Spec: &resource.MeshExternalServiceSpec{
		Match: []resource.ExternalMatch{{Type: resource.MatchDomain, Value: "api.example.com", Port: 443, Protocol: resource.ProtocolGRPC}},
		Destination: &resource.ExternalDestination{
			Type:      resource.DestinationRegular,
			Endpoints: []resource.ExternalEndpoint{{Address: "127.0.0.1", Port: b.port}},
			TLS: &resource.ExternalTLS{Enabled: true, Version: &resource.TLSVersion{Min: resource.TLS12, Max: resource.TLS13},
				CACert: &resource.DataSource{InlineString: str(p.caPEM)}, ClientCert: &resource.DataSource{InlineString: str(certPEM)},
				ClientKey: &resource.DataSource{InlineString: str(keyPEM)}},
		},
	}})
	if errs := resource.Validate(mes); len(errs) > 0 {
		t.Fatalf("the service is not valid: %v", errs)
	}
	const node, name = "default.caller", "api_443"
	c := served(t, e, node, name, func(*clusterv3.Cluster) bool { return true })
	cfg := clientTLS(t, e, node, c)
	if cfg.ServerName != "api.example.com" || cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS13 || len(cfg.Certificates) != 1 {
		t.Fatalf("client TLS from the cluster: server name %q, versions %x-%x, %d client certificates; want api.example.com, TLS 1.2-1.3, 1",
			cfg.ServerName, cfg.MinVersion, cfg.MaxVersion, len(cfg.Certificates))
	}
	var addr string
	for _, m := range fetch(t, e, node, EndpointURL, name) {
		ep := m.(*endpointv3.ClusterLoadAssignment).GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		addr = net.JoinHostPort(ep.GetAddress(), fmt.Sprint(ep.GetPortValue()))
	}
	if addr == "" {
		t.Fatalf("no endpoints for %s", name)
	}
	if id, err := tlsCall(t, addr, cfg); err != nil || id != "external" {
		t.Fatalf("a call with the served TLS: %q, %v", id, err)
	}

	// The SNI override reaches the cluster and is what the client sends:
	// the server's certificate does not hold it.
	e.update(mes.Key(), func(o *resource.Object) {
		o.Spec.(*resource.MeshExternalServiceSpec).Destination.TLS.Verification = &resource.TLSVerification{ServerName: "other.example.com"}
	})
	c = served(t, e, node, name, func(c *clusterv3.Cluster) bool {
		var up tlsv3.UpstreamTlsContext
		return c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&up) == nil && up.GetSni() == "other.example.com"
	})
	cfg = clientTLS(t, e, node, c)
	if _, err := tlsCall(t, addr, cfg); err == nil || !strings.Contains(err.Error(), "other.example.com") {
		t.Fatalf("a call with SNI other.example.com to a server of api.example.com: %v; want a certificate error", err)
	}
}

// tlsCall makes one call over TLS configured by cfg.
func tlsCall(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	return call(context.Background(), testgrpc.NewTestServiceClient(cc))
}
