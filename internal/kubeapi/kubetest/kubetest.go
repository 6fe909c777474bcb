// Package kubetest runs a real etcd and kube-apiserver on loopback for
// tests: no controller-manager, so namespaces are never finalized, owned
// objects are not garbage-collected and Services get no EndpointSlices by
// themselves. The binaries are built once per machine by test/k8s/k8s.sh
// into a cache outside the repository.
//
// A test package starts one cluster in TestMain (Main) and its tests take
// turns on it (Cluster.Fresh), each starting from no meshnames objects.
// Without the binaries the tests are skipped, except under CI=true, where
// they fail.
//
// Only tests import it. It imports kubeapi, crd, install and porttest.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"
	"k8s.io/client-go/rest"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/install"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/porttest"
)

// Version is the Kubernetes version test/k8s/k8s.sh builds.
const Version = "v1.37.2"

// Tokens of the two users the API server knows: an administrator, and
// "meshnames", who may do only what docs/kubernetes.md's RBAC grants.
const (
	AdminToken     = "meshnames-test-admin"
	MeshnamesToken = "meshnames-test-controller"
	MeshnamesUser  = "meshnames"
)

// BinDir returns where the binaries are: $MESHNAMES_K8S_BIN, or the cache
// test/k8s/k8s.sh builds into.
func BinDir() string {
	if d := os.Getenv("MESHNAMES_K8S_BIN"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "k8s-test", Version, "bin")
}

// Available reports whether the binaries exist, and if not, why.
func Available() error {
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(BinDir(), b)); err != nil {
			return fmt.Errorf("%s not found in %s: build it with test/k8s/k8s.sh build (about 30 minutes once per machine)", b, BinDir())
		}
	}
	return nil
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Dir holds the data, the certificates and the kubeconfig files.
	Dir string
	// Host is the API server's URL.
	Host string
	// Kubeconfig is an administrator's kubeconfig; MeshnamesKubeconfig
	// the meshnames user's.
	Kubeconfig, MeshnamesKubeconfig string
	// Client is an administrator's client.
	Client *kubeapi.Client

	procs []*exec.Cmd
	// logs are the files of the processes' output, in Dir: kept in
	// memory, the API server's log of a benchmark naming 10,000 Services
	// (2 MB) would count in the live heap the benchmark measures.
	logs []string
	mu   sync.Mutex // held by the test that uses the cluster (Fresh)
}

func freePort() (int, error) { return porttest.Free() }

// Start starts a cluster in a new temporary directory.
func Start(ctx context.Context) (*Cluster, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "meshnames-kube")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	etcdPort, err1 := freePort()
	peerPort, err2 := freePort()
	apiPort, err3 := freePort()
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := c.run("etcd", "--name", "test", "--data-dir", filepath.Join(dir, "etcd"), "--unsafe-no-fsync", "--log-level", "warn",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test="+peerURL); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, &http.Client{}, etcdURL+"/health", "", c.procs[0]); err != nil {
		return nil, fmt.Errorf("etcd: %w\n%s", err, c.logTail(0, 3000))
	}
	saKey := filepath.Join(dir, "sa.key")
	if err := writeKey(saKey); err != nil {
		return nil, err
	}
	tokens := fmt.Sprintf("%s,admin,admin-uid,system:masters\n%s,%s,meshnames-uid\n", AdminToken, MeshnamesToken, MeshnamesUser)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return nil, err
	}
	certs := filepath.Join(dir, "certs")
	if err := c.run("kube-apiserver", "--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(apiPort), "--cert-dir", certs,
		"--advertise-address", "127.0.0.1", "--endpoint-reconciler-type", "none",
		"--token-auth-file", filepath.Join(dir, "tokens.csv"), "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.96.0.0/16", "--disable-admission-plugins", "ServiceAccount"); err != nil {
		return nil, err
	}
	c.Host = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // only to poll /readyz
	if err := waitHTTP(ctx, insecure, c.Host+"/readyz", AdminToken, c.procs[1]); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w\n%s", err, c.logTail(1, 3000))
	}
	ca := filepath.Join(certs, "apiserver.crt")
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	c.MeshnamesKubeconfig = filepath.Join(dir, "meshnames.kubeconfig")
	for path, token := range map[string]string{c.Kubeconfig: AdminToken, c.MeshnamesKubeconfig: MeshnamesToken} {
		if err := c.writeKubeconfig(path, token); err != nil {
			return nil, err
		}
	}
	cl, err := kubeapi.New(&rest.Config{Host: c.Host, BearerToken: AdminToken, TLSClientConfig: rest.TLSClientConfig{CAFile: ca}})
	if err != nil {
		return nil, err
	}
	c.Client = cl
	ok = true
	return c, nil
}

// writeKubeconfig writes a kubeconfig of the cluster that sends token.
func (c *Cluster) writeKubeconfig(path, token string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: t, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: t, context: {cluster: t, user: u}}]
current-context: t
`, c.Host, filepath.Join(c.Dir, "certs", "apiserver.crt"), token)
	return os.WriteFile(path, []byte(kc), 0o600)
}

// Pids are the process ids of the cluster's etcd and kube-apiserver, for
// benchmarks that measure their CPU time.
func (c *Cluster) Pids() []int {
	pids := make([]int, len(c.procs))
	for i, p := range c.procs {
		pids[i] = p.Process.Pid
	}
	return pids
}

func (c *Cluster) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(BinDir(), name), args...)
	path := filepath.Join(c.Dir, name+".log")
	log, err := os.Create(path)
	if err != nil {
		return err
	}
	defer log.Close() // the process has its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	c.logs = append(c.logs, path)
	return nil
}

func waitHTTP(ctx context.Context, hc *http.Client, url, token string, proc *exec.Cmd) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if proc.ProcessState != nil || proc.Process.Signal(syscall.Signal(0)) != nil {
			return errors.New("exited")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready within 2 minutes", url)
}

func writeKey(path string) error {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	return os.WriteFile(path, b, 0o600)
}

// logTail returns the last n bytes of the log of the i-th process.
func (c *Cluster) logTail(i, n int) string {
	b, err := os.ReadFile(c.logs[i])
	if err != nil {
		return err.Error()
	}
	return string(b[max(len(b)-n, 0):])
}

// Stop kills the processes and removes the directory.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	if c.Dir != "" {
		os.RemoveAll(c.Dir)
	}
}

// Logs returns the API server's log.
func (c *Cluster) Logs() string {
	if len(c.logs) < 2 {
		return ""
	}
	return c.logTail(1, math.MaxInt)
}

// Main starts a cluster for a test package, installs the CRDs and the
// RBAC of the meshnames user, runs the tests and stops it. Without the
// binaries it runs the tests with *cluster nil (they skip; see Need),
// except under CI=true, where it fails.
//
// A process that runs no test starts no cluster: a fuzzing worker (go
// test -fuzz runs the binary again for each, and kills them when the
// fuzzing ends, so each left its cluster's 120 MB directory behind) and a
// run whose -test.run is ^$ (the fuzz targets here decode, and need none).
func Main(m *testing.M, cluster **Cluster) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if runsNoTest() {
		return m.Run()
	}
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "kubetest:", err)
			return 1
		}
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	c, err := Start(ctx)
	if err == nil {
		err = c.Setup(ctx)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubetest: starting the API server:", err)
		if c != nil {
			c.Stop()
		}
		return 1
	}
	*cluster = c
	code := m.Run()
	c.Stop()
	return code
}

// runsNoTest reports whether this test binary runs no test: it is a
// fuzzing worker, or -test.run matches nothing.
func runsNoTest() bool {
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		return true
	}
	f := flag.Lookup("test.run")
	return f != nil && f.Value.String() == "^$"
}

// Need skips t when there is no cluster (fails it under CI=true).
func Need(t testing.TB, c *Cluster) {
	t.Helper()
	if c != nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no kube-apiserver: %v", Available())
	}
	t.Skipf("no kube-apiserver: %v", Available())
}

// Setup installs the CRDs (and the admission policy that comes with them)
// and the meshnames user's RBAC, and creates the system namespace.
func (c *Cluster) Setup(ctx context.Context) error {
	crds, err := crd.Manifests(crd.DefaultSystemNamespace)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, crds); err != nil {
		return err
	}
	rbac, err := install.RBACManifests(crd.DefaultSystemNamespace)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, rbac); err != nil {
		return err
	}
	// The installation binds the ClusterRole to the ServiceAccount
	// meshnames runs as; most tests run it as a user bound to the same
	// roles, with a token the API server was started with.
	binding := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: meshnames-test-user}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: meshnames}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: %s}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: meshnames-test-user, namespace: %s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: meshnames}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: %s}]
`, MeshnamesUser, crd.DefaultSystemNamespace, MeshnamesUser)
	return c.Apply(ctx, []byte(binding))
}

// known maps the kinds Apply understands to their collections.
var known = map[string]kubeapi.Resource{
	"CustomResourceDefinition":         kubeapi.CRDs,
	"Namespace":                        kubeapi.Namespaces,
	"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	"ClusterRole":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Role":                             {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles", Namespaced: true},
	"RoleBinding":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings", Namespaced: true},
	"ServiceAccount":                   {Version: "v1", Resource: "serviceaccounts", Namespaced: true},
	"Service":                          kubeapi.Services,
	"EndpointSlice":                    kubeapi.EndpointSlices,
	"Pod":                              kubeapi.Pods,
	"ServiceExport":                    crd.ServiceExports,
	"ServiceImport":                    crd.ServiceImports,
}

// Resource returns the collection of kind (built in, or one of
// meshnames' CRDs).
func Resource(kind string) (kubeapi.Resource, bool) {
	if r, ok := known[kind]; ok {
		return r, true
	}
	if k, ok := crd.ByName(kind); ok {
		return k.Resource(), true
	}
	return kubeapi.Resource{}, false
}

// Apply creates or replaces every object of a YAML stream, like kubectl
// apply without its merge; it waits for CRDs to be established. Objects
// of namespaced kinds without a namespace go to "default".
func (c *Cluster) Apply(ctx context.Context, stream []byte) error {
	var crds []string
	for _, doc := range bytes.Split(stream, []byte("\n---")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return err
		}
		if len(m) == 0 {
			continue
		}
		obj, err := jsonable(m)
		if err != nil {
			return err
		}
		o := obj.(map[string]any)
		kind, _ := o["kind"].(string)
		r, ok := Resource(kind)
		if !ok {
			return fmt.Errorf("kubetest: cannot apply a %s", kind)
		}
		meta, _ := o["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns := ""
		if r.Namespaced {
			ns, _ = meta["namespace"].(string)
			if ns == "" {
				ns = "default"
				meta["namespace"] = ns
			}
		}
		var cur struct {
			Metadata kubeapi.ObjectMeta `json:"metadata"`
		}
		switch err := c.Client.Get(ctx, r, ns, name, &cur); {
		case errors.Is(err, kubeapi.ErrNotFound):
			err = c.Client.Create(ctx, r, ns, o, nil)
			if err != nil {
				return fmt.Errorf("create %s %s: %w", kind, name, err)
			}
		case err != nil:
			return err
		default:
			meta["resourceVersion"] = cur.Metadata.ResourceVersion
			if err := c.Client.Update(ctx, r, ns, name, "", o, nil); err != nil {
				return fmt.Errorf("update %s %s: %w", kind, name, err)
			}
		}
		if kind == "CustomResourceDefinition" {
			crds = append(crds, name)
		}
	}
	for _, name := range crds {
		if err := c.waitEstablished(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) waitEstablished(ctx context.Context, name string) error {
	for range 600 {
		var d struct {
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		}
		if err := c.Client.Get(ctx, kubeapi.CRDs, "", name, &d); err != nil {
			return err
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == "Established" && cond.Status == "True" {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not established within 30s", name)
}

// jsonable turns YAML's map[any]any into JSON's map[string]any.
func jsonable(v any) (any, error) {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, v := range t {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("non-string key %v", k)
			}
			jv, err := jsonable(v)
			if err != nil {
				return nil, err
			}
			m[ks] = jv
		}
		return m, nil
	case map[string]any:
		for k, v := range t {
			jv, err := jsonable(v)
			if err != nil {
				return nil, err
			}
			t[k] = jv
		}
		return t, nil
	case []any:
		for i, v := range t {
			jv, err := jsonable(v)
			if err != nil {
				return nil, err
			}
			t[i] = jv
		}
		return t, nil
	}
	return v, nil
}

// Fresh gives t the cluster to itself, without any meshnames object,
// meshnames lease, Service, EndpointSlice or Pod, until t ends. Tests
// that call it take turns.
func (c *Cluster) Fresh(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	t.Cleanup(c.mu.Unlock)
	if err := c.Wipe(t.Context()); err != nil {
		t.Fatalf("wiping the cluster: %v", err)
	}
}

// Wipe deletes every meshnames object and lease, and every Service,
// EndpointSlice and Pod but the API server's own Service.
func (c *Cluster) Wipe(ctx context.Context) error {
	var rs []kubeapi.Resource
	for _, k := range crd.Kinds() {
		rs = append(rs, k.Resource())
	}
	rs = append(rs, kubeapi.Leases, kubeapi.Services, kubeapi.EndpointSlices, kubeapi.Pods)
	for _, r := range rs {
		var refs [][2]string
		_, err := c.Client.List(ctx, r, "", kubeapi.ListOptions{}, func(raw json.RawMessage) error {
			var m struct {
				Metadata kubeapi.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			md := m.Metadata
			switch {
			case r == kubeapi.Services && md.Namespace == "default" && md.Name == "kubernetes":
			case r == kubeapi.Leases && !strings.HasPrefix(md.Name, "mn-") && !strings.HasPrefix(md.Name, "meshnames"):
			default:
				refs = append(refs, [2]string{md.Namespace, md.Name})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", r, err)
		}
		for _, ref := range refs {
			if err := c.Client.Delete(ctx, r, ref[0], ref[1], kubeapi.Preconditions{}); err != nil && !errors.Is(err, kubeapi.ErrNotFound) {
				return fmt.Errorf("delete %s %s/%s: %w", r, ref[0], ref[1], err)
			}
		}
	}
	return nil
}
