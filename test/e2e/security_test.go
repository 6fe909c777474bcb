package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

const ownerService = `type: MeshService
name: payments
mesh: default
spec:
  ports:
  - port: 8080
    targetPort: 8080
    appProtocol: http
`

const takeoverGenerator = `type: HostnameGenerator
name: takeover
spec:
  selector:
    meshService:
      matchLabels:
        kuma.io/origin: zone
  template: "{{ .DisplayName }}.mesh.local"
`

// cli runs a client command of the binary with the extra environment.
func cli(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return o.String(), e.String(), err
}

// TestSecurity_TokenLifecycleAcrossInstances issues a token on one
// instance from the command line, uses it from the command line on
// another instance sharing PostgreSQL (which requires tokens), revokes it
// on the first, and waits for the second to refuse it: within a second.
func TestSecurity_TokenLifecycleAcrossInstances(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, "a", "--store", url)
	b := start(t, "b", "--store", url, "--api-loopback-admin=false")
	a.waitReady(60 * time.Second)
	b.waitReady(60 * time.Second)

	// Issued on a: from its host, without a token, the command line is admin.
	out, stderr, err := cli(t, nil, "--server", a.api, "token", "user", "--name", "carol", "--role", "service-owner", "--mesh", "default", "--valid-for", "1h")
	if err != nil {
		t.Fatalf("token user: %v\n%s", err, stderr)
	}
	tok := strings.TrimSpace(out)
	file := filepath.Join(t.TempDir(), "carol.token")
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := filepath.Join(t.TempDir(), "svc.yaml")
	gen := filepath.Join(t.TempDir(), "gen.yaml")
	if err := errors.Join(os.WriteFile(svc, []byte(ownerService), 0o600), os.WriteFile(gen, []byte(takeoverGenerator), 0o600)); err != nil {
		t.Fatal(err)
	}

	// b requires tokens: without one it refuses, with carol's it serves.
	if _, stderr, err := cli(t, nil, "--server", b.api, "get", "meshes"); err == nil || !strings.Contains(stderr, "needs a token") {
		t.Errorf("b without a token: %v %s", err, stderr)
	}
	if out, stderr, err := cli(t, nil, "--server", b.api, "--token-file", file, "apply", "-f", svc); err != nil || !strings.Contains(out, "created") {
		t.Fatalf("carol applying a service on b: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = cli(t, []string{"MESHNAMES_TOKEN=" + tok}, "--server", b.api, "apply", "-f", gen)
	if err == nil || !strings.Contains(out+stderr, "may not write HostnameGenerator") {
		t.Errorf("carol (service-owner) applying a generator on b: %v %s%s; want 403", err, out, stderr)
	}

	// Revoked on a; b refuses it within a second.
	list, _, err := cli(t, nil, "--server", a.api, "token", "list")
	if err != nil {
		t.Fatal(err)
	}
	id := ""
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "carol") {
			id = strings.Fields(line)[0]
		}
	}
	if id == "" {
		t.Fatalf("token list on a does not show carol's token:\n%s", list)
	}
	req, _ := http.NewRequest(http.MethodGet, b.api+"/meshes", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("b before the revocation: %v %v", resp, err)
	}
	// b is polled while the command line revokes the token on a: the
	// first refusal is compared with the time the revocation was stored.
	refused := make(chan time.Time, 1)
	go func() {
		defer close(refused)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			resp, err := http.DefaultClient.Do(req.Clone(context.Background()))
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				refused <- time.Now()
				return
			}
		}
	}()
	if out, stderr, err := cli(t, nil, "--server", a.api, "token", "revoke", id); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("token revoke: %v %s%s", err, out, stderr)
	}
	first, ok := <-refused
	if !ok {
		t.Fatal("b never refused the revoked token")
	}
	list, _, err = cli(t, nil, "--server", a.api, "token", "list", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var infos []struct {
		ID        string    `json:"id"`
		RevokedAt time.Time `json:"revokedAt"`
	}
	if err := json.Unmarshal([]byte(list), &infos); err != nil {
		t.Fatal(err)
	}
	var revokedAt time.Time
	for _, i := range infos {
		if i.ID == id {
			revokedAt = i.RevokedAt
		}
	}
	lag := first.Sub(revokedAt)
	if revokedAt.IsZero() || lag > time.Second {
		t.Fatalf("b refused the token %s after it was revoked on a (at %v); want within a second", lag, revokedAt)
	}
	t.Logf("b refused the token %s after it was revoked on a", lag.Round(time.Millisecond))
	_, stderr, err = cli(t, nil, "--server", b.api, "--token-file", file, "get", "meshes")
	if err == nil || !strings.Contains(stderr, "revoked") {
		t.Errorf("the command line with the revoked token on b: %v %s", err, stderr)
	}

	// b's audit log, read with the first start's admin token (written by
	// whichever instance created the key), shows all of it.
	adminToken := ""
	for _, p := range []*proc{a, b} {
		if f := dataDirOf(p); f != "" {
			if data, err := os.ReadFile(filepath.Join(f, "admin.token")); err == nil {
				adminToken = strings.TrimSpace(string(data))
			}
		}
	}
	if adminToken == "" {
		t.Fatal("neither instance wrote admin.token")
	}
	out, stderr, err = cli(t, []string{"MESHNAMES_TOKEN=" + adminToken}, "--server", b.api, "audit", "--since", "1h")
	if err != nil {
		t.Fatalf("audit on b: %v %s", err, stderr)
	}
	for _, want := range []string{"issue-token", "revoke-token", "create", "HostnameGenerator", "refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("b's audit log lacks %q:\n%s", want, out)
		}
	}
}

// dataDirOf is the --data-dir a process was started with.
func dataDirOf(p *proc) string {
	for i, a := range p.cmd.Args {
		if a == "--data-dir" && i+1 < len(p.cmd.Args) {
			return p.cmd.Args[i+1]
		}
	}
	return ""
}

// TestSecurity_TLSOffLoopback checks that serving the API off loopback
// without TLS is refused at start, and serves it over TLS with the first
// start's admin token.
func TestSecurity_TLSOffLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Refused before anything listens (nothing binds 0.0.0.0 here).
	for _, addr := range []string{"0.0.0.0:5681", "[::]:5681", ":5681"} {
		_, stderr, err := run(t, ctx, nil, "serve", "--api-addr", addr, "--data-dir", t.TempDir())
		if err == nil || !strings.Contains(stderr, "api.addr: "+addr+" is not a loopback address: off loopback the API needs TLS") {
			t.Errorf("serve --api-addr %s without TLS: %v\n%s", addr, err, stderr)
		}
	}
	if _, stderr, err := run(t, ctx, nil, "serve", "--api-addr", "0.0.0.0:5681", "--api-tls-cert", "only-a-cert.pem"); err == nil || !strings.Contains(stderr, "api.tls: set both cert and key") {
		t.Errorf("a certificate without its key: %v %s", err, stderr)
	}
	if out, _, err := run(t, ctx, nil, "config", "show", "--api-addr", "0.0.0.0:5681", "--api-insecure"); err != nil || !strings.Contains(out, "insecure: true") {
		t.Errorf("--api-insecure is accepted: %v %s", err, out)
	}

	// Over TLS, on loopback with tokens required (as off loopback).
	dir := t.TempDir()
	certFile, keyFile, caPEM := selfSigned(t, dir)
	data := t.TempDir()
	p := start(t, "tls", "--data-dir", data, "--api-tls-cert", certFile, "--api-tls-key", keyFile, "--api-loopback-admin=false")
	api := strings.Replace(p.api, "http://", "https://", 1)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(api + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the TLS server is not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, err := http.Get(p.api + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port answered %d", resp.StatusCode)
		}
	}
	tokenFile := filepath.Join(data, "admin.token")
	st, err := os.Stat(tokenFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token: %v, mode %v; want 0600", err, st)
	}
	raw, _ := os.ReadFile(tokenFile)
	if strings.Contains(p.log.String(), strings.TrimSpace(string(raw))) {
		t.Error("the log holds the admin token")
	}
	if !strings.Contains(p.log.String(), "wrote an admin token") || !strings.Contains(p.log.String(), tokenFile) {
		t.Errorf("the log does not name the admin token's path:\n%s", p.log.String())
	}
	caFile := filepath.Join(dir, "ca.pem")
	if _, stderr, err := cli(t, nil, "--server", api, "--ca-file", caFile, "get", "meshes"); err == nil || !strings.Contains(stderr, "needs a token") {
		t.Errorf("no token over TLS: %v %s", err, stderr)
	}
	out, stderr, err := cli(t, nil, "--server", api, "--ca-file", caFile, "--token-file", tokenFile, "get", "meshes")
	if err != nil || !strings.Contains(out, "default") {
		t.Errorf("the admin token over TLS: %v\n%s%s", err, out, stderr)
	}
	if _, stderr, err := cli(t, nil, "--server", api, "--token-file", tokenFile, "get", "meshes"); err == nil || !strings.Contains(stderr, "certificate") {
		t.Errorf("without --ca-file the self-signed certificate must be refused: %v %s", err, stderr)
	}
	// A restart does not write another admin token.
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	again := start(t, "tls-again", "--data-dir", data, "--api-tls-cert", certFile, "--api-tls-key", keyFile)
	again.waitLog(t, "serving the REST API", 60*time.Second)
	after, _ := os.ReadFile(tokenFile)
	if string(after) != string(raw) || strings.Contains(again.log.String(), "wrote an admin token") {
		t.Error("a restart replaced admin.token")
	}
}

// waitLog waits for a line of the process's log.
func (p *proc) waitLog(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.log.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %s", p.name, s, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// selfSigned writes a CA-less self-signed certificate for 127.0.0.1 and
// localhost, and its key, into dir (also as ca.pem).
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, certPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "meshnames test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certFile, keyFile = filepath.Join(dir, "api.pem"), filepath.Join(dir, "api-key.pem")
	for f, b := range map[string][]byte{
		certFile: certPEM, filepath.Join(dir, "ca.pem"): certPEM,
		keyFile: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile, certPEM
}
