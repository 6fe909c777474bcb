package bench

// Helpers for benchmarks that drive real `meshnames serve` processes: the
// binary (built once per test binary, removed by TestMain), a process with
// its log, a keep-alive HTTP client, an embedded store seeded directly, and
// readings of /metrics and /proc.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/porttest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/pebble"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// meshnamesBinary builds cmd/meshnames once (only when a benchmark asks for
// it) and returns its path.
func meshnamesBinary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "meshnames-bench-bin")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "meshnames")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/meshnames/meshnames/cmd/meshnames").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binPath
}

// freePort returns a loopback port that was free a moment ago
// (porttest.Free).
func freePort(tb testing.TB) int {
	tb.Helper()
	p, err := porttest.Free()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// logFile is where a server's standard output and error go: a file, which
// the process writes itself. A pipe to the benchmark made every log line
// (an audit line per API write) wake a goroutine of the benchmark's
// process to copy it, on the cores the load shares: BenchmarkRestLoad
// measured 4,700 creates/s where the black-box rest-load, its server
// logging to a file, measured 5,700-6,400/s.
type logFile struct {
	f *os.File
}

func newLogFile(tb testing.TB) *logFile {
	tb.Helper()
	f, err := os.CreateTemp(tb.TempDir(), "meshnames-*.log")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return &logFile{f: f}
}

// String returns what the process has logged so far.
func (l *logFile) String() string {
	b, err := os.ReadFile(l.f.Name())
	if err != nil {
		return fmt.Sprintf("(log %s unreadable: %v)", l.f.Name(), err)
	}
	return string(b)
}

// serverProc is one running `meshnames serve`.
type serverProc struct {
	tb      testing.TB
	cmd     *exec.Cmd
	log     *logFile
	api     string // http://127.0.0.1:port
	started time.Time
	done    chan struct{}
	err     error
}

// startServer runs `meshnames serve` on the embedded store in dataDir with
// free loopback ports. Cleanup kills it (if still running) and prints its
// log when the benchmark failed.
func startServer(tb testing.TB, dataDir string) *serverProc {
	tb.Helper()
	return startServerArgs(tb, "--data-dir", dataDir)
}

// startServerArgs runs `meshnames serve` with args (which name the store)
// and free loopback API and DNS ports.
func startServerArgs(tb testing.TB, args ...string) *serverProc {
	tb.Helper()
	return startServerEnv(tb, nil, args...)
}

// startServerEnv is startServerArgs with env added to the benchmark's
// environment (such as MESHNAMES_CPU_PROFILE=FILE).
func startServerEnv(tb testing.TB, env []string, args ...string) *serverProc {
	tb.Helper()
	api := fmt.Sprintf("127.0.0.1:%d", freePort(tb))
	dns := fmt.Sprintf("127.0.0.1:%d", freePort(tb))
	p := &serverProc{tb: tb, log: newLogFile(tb), api: "http://" + api, done: make(chan struct{})}
	p.cmd = exec.Command(meshnamesBinary(tb), append([]string{"serve", "--api-addr", api, "--dns-addr", dns, "--xds-addr", "127.0.0.1:0"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log.f, p.log.f
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start meshnames serve: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.kill()
		if tb.Failed() {
			tb.Logf("--- log of %s:\n%s", p.cmd, p.log.String())
		}
	})
	return p
}

func (p *serverProc) pid() int { return p.cmd.Process.Pid }

// waitReady polls /readyz until it answers 200 and returns when it did.
func (p *serverProc) waitReady(c *http.Client, timeout time.Duration) time.Time {
	p.tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p.checkAlive()
		resp, err := c.Get(p.api + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now()
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.tb.Fatalf("server not ready after %s", timeout)
	return time.Time{}
}

// checkAlive fails the benchmark if the process has exited.
func (p *serverProc) checkAlive() {
	p.tb.Helper()
	select {
	case <-p.done:
		p.tb.Fatalf("meshnames serve exited: %v", p.err)
	default:
	}
}

// stop sends SIGTERM and waits for the process to exit (SIGKILL after 30 s).
func (p *serverProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *serverProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// controllerStart returns the duration the hostnames controller logged for
// its initial computation (every service rendered and written).
func (p *serverProc) controllerStart() (time.Duration, bool) {
	re := regexp.MustCompile(`msg="controllers started".* dur=(\S+)`)
	m := re.FindStringSubmatch(p.log.String())
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[1])
	return d, err == nil
}

// newClient returns an HTTP client that keeps enough idle connections for
// 16 concurrent workers.
func newClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute},
		Timeout:   60 * time.Second,
	}
}

// serviceJSON is the body of a PUT of MeshService name in mesh default:
// one port and a dataplaneTags selector. The API adds the system labels.
func serviceJSON(name string) []byte {
	return fmt.Appendf(nil, `{"type":"MeshService","name":%q,"mesh":"default",`+
		`"spec":{"selector":{"dataplaneTags":{"kuma.io/service":%q}},"ports":[{"name":"http","port":80,"targetPort":8080,"appProtocol":"http"}]}}`,
		name, name)
}

func servicePath(api, name string) string {
	return api + "/meshes/default/meshservices/" + name
}

// putService creates MeshService name and fails unless the API answers 201.
func putService(c *http.Client, api, name string, body []byte, minimal bool) error {
	return putResource(c, servicePath(api, name), body, minimal)
}

// putResource creates the resource at url and fails unless the API
// answers 201.
func putResource(c *http.Client, url string, body []byte, minimal bool) error {
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if minimal {
		req.Header.Set("Prefer", "return=minimal")
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("PUT %s: %s: %s", url, resp.Status, msg)
	}
	return nil
}

// serviceView is the part of a MeshService the benchmarks read.
type serviceView struct {
	Name   string `json:"name"`
	Status struct {
		Addresses []struct {
			Hostname string `json:"hostname"`
			Status   string `json:"status"`
		} `json:"addresses"`
		VIPs []struct {
			IP string `json:"ip"`
		} `json:"vips"`
	} `json:"status"`
}

// hasName reports whether s has its default hostname, Available.
func (s *serviceView) hasName() bool {
	want := s.Name + ".svc.mesh.local"
	for _, a := range s.Status.Addresses {
		if a.Hostname == want && a.Status == resource.AddressAvailable {
			return true
		}
	}
	return false
}

// hasVIP reports whether s has a VIP.
func (s *serviceView) hasVIP() bool { return len(s.Status.VIPs) > 0 }

// named reports whether s is ready to be called: its default hostname
// Available and a VIP (issue 4: "all named and with VIPs").
func (s *serviceView) named() bool { return s.hasName() && s.hasVIP() }

// getService reads MeshService name through the API.
func getService(c *http.Client, api, name string) (*serviceView, error) {
	resp, err := c.Get(servicePath(api, name))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", name, resp.Status, msg)
	}
	var s serviceView
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("GET %s: %w", name, err)
	}
	return &s, nil
}

// countNamed pages through every MeshService of mesh default, 1,000 at a
// time, and returns how many there are and how many of them carry their
// default hostname as Available.
func countNamed(c *http.Client, api string) (total, named int, err error) {
	for offset := 0; ; {
		resp, err := c.Get(fmt.Sprintf("%s/meshes/default/meshservices?size=1000&offset=%d", api, offset))
		if err != nil {
			return 0, 0, err
		}
		var page struct {
			Total int           `json:"total"`
			Items []serviceView `json:"items"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return 0, 0, fmt.Errorf("list: %s: %w", resp.Status, err)
		}
		for i := range page.Items {
			if page.Items[i].named() {
				named++
			}
		}
		offset += len(page.Items)
		if len(page.Items) == 0 || offset >= page.Total {
			return page.Total, named, nil
		}
	}
}

// metric returns the value of one series of /metrics, named exactly as in
// the exposition (with its labels), or 0 when it is absent.
func metric(c *http.Client, api, series string) (float64, error) {
	resp, err := c.Get(api + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), series+" ")
		if ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, sc.Err()
}

const (
	writesOK      = `meshnames_controllers_writes_total{result="ok",what="status"}`
	writesFailed  = `meshnames_controllers_writes_total{result="error",what="status"}`
	heapInuse     = `go_memstats_heap_inuse_bytes`
	cacheFrozen   = `meshnames_cache_frozen_total`
	cacheDecoded  = `meshnames_cache_decoded_objects`
	returnPending = `meshnames_memory_return_pending`
)

// waitFrozen waits until the server's cache has frozen at least n
// resources and holds none decoded (the steady state: it freezes what has
// not changed for cache.FreezeAfter, and a resource written after its
// first freeze is decoded again until the next), and then for quiet: the
// memory a burst of work leaves is returned to the OS in the first quiet
// second after it.
func waitFrozen(tb testing.TB, c *http.Client, api string, n int, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, err := metric(c, api, cacheFrozen)
		if err != nil {
			tb.Fatal(err)
		}
		decoded, err := metric(c, api, cacheDecoded)
		if err != nil {
			tb.Fatal(err)
		}
		if v >= float64(n) && decoded == 0 {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the cache froze %.0f resources in %s and holds %.0f decoded, want at least %d and none", v, timeout, decoded, n)
		}
		time.Sleep(time.Second)
	}
	time.Sleep(3 * time.Second)
}

// runtimeMemory describes where a server's RSS beyond its heap in use
// goes, from its Go runtime metrics.
func runtimeMemory(tb testing.TB, c *http.Client, api string) string {
	tb.Helper()
	var parts []string
	for _, m := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_memstats_stack_inuse_bytes",
		"go_memstats_mspan_inuse_bytes", "go_memstats_gc_sys_bytes", "go_memstats_other_sys_bytes", "go_memstats_sys_bytes", "go_memstats_alloc_bytes_total",
		"meshnames_memory_returns_total"} {
		v, err := metric(c, api, m)
		if err != nil {
			tb.Fatal(err)
		}
		if strings.HasSuffix(m, "_bytes") || strings.HasSuffix(m, "_bytes_total") {
			parts = append(parts, fmt.Sprintf("%s=%.0fMiB", strings.TrimPrefix(m, "go_memstats_"), v/(1<<20)))
		} else {
			parts = append(parts, fmt.Sprintf("%s=%.0f", m, v))
		}
	}
	return strings.Join(parts, " ")
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// cpuTime returns the user plus system CPU time of process pid.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/PID/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed /proc/PID/stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// rss returns VmRSS of process pid in bytes.
func rss(pid int) (int64, error) { return procStatus(pid, "VmRSS") }

// rssParts says what process pid's RSS holds: its anonymous memory (the
// Go runtime's) and the pages of files mapped into it (the binary's code
// and data that ran).
func rssParts(pid int) string {
	var parts []string
	for _, field := range []string{"RssAnon", "RssFile"} {
		v, err := procStatus(pid, field)
		if err != nil {
			return err.Error()
		}
		parts = append(parts, fmt.Sprintf("%s %.1f MiB", field, float64(v)/(1<<20)))
	}
	return strings.Join(parts, ", ")
}

// peakRSS returns the most resident memory of process pid so far.
func peakRSS(pid int) (int64, error) { return procStatus(pid, "VmHWM") }

// procStatus returns the size field of /proc/PID/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/PID/status", field)
}

// seedBatch is how many store operations one seeding transaction holds.
const seedBatch = 1000

// seededName is the name of the i-th seeded MeshService; names sort in
// creation order.
func seededName(i int) string { return fmt.Sprintf("svc-%06d", i) }

// seedServices creates mesh "default" and n MeshServices in the embedded
// store in dir, directly through the store (no server running), as the API
// would have stored them: defaulted, validated and with the system labels.
func seedServices(tb testing.TB, dir string, n int) {
	tb.Helper()
	seedObjects(tb, dir, n, func(i int) *resource.Object {
		name := seededName(i)
		return &resource.Object{
			Kind: resource.MeshService, Mesh: "default", Name: name,
			Labels: systemLabels(name, nil),
			Spec: &resource.MeshServiceSpec{
				Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": name}},
				Ports:    []resource.Port{{Name: "http", Port: 80, TargetPort: &resource.IntOrString{Int: 8080}, AppProtocol: "http"}},
			},
		}
	})
}

// systemLabels returns labels plus those the API sets on resource name of
// mesh default in zone default.
func systemLabels(name string, labels map[string]string) map[string]string {
	out := map[string]string{
		resource.LabelOrigin:      resource.OriginZone,
		resource.LabelZone:        "default",
		resource.LabelDisplayName: name,
		resource.LabelMesh:        "default",
	}
	maps.Copy(out, labels)
	return out
}

// openEmbedded opens the embedded store in dir with the engine the
// servers of the benchmarks use: MESHNAMES_STORE_ENGINE when set, else the
// default, pebble; so that a server started on a seeded directory does not
// migrate it first.
func openEmbedded(tb testing.TB, dir string) store.Store {
	tb.Helper()
	var st store.Store
	var err error
	if os.Getenv("MESHNAMES_STORE_ENGINE") == config.EngineSQLite {
		st, err = sqlite.Open(dir)
	} else {
		st, err = pebble.Open(dir)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// seedObjects creates mesh "default" and the n objects obj(0..n-1) in the
// embedded store in dir, directly through the store (no server running);
// each must be what the API would have stored: defaulted, validated and
// with the system labels.
func seedObjects(tb testing.TB, dir string, n int, object func(i int) *resource.Object) {
	tb.Helper()
	ctx := context.Background()
	st := openEmbedded(tb, dir)
	defer func() {
		if err := st.Close(); err != nil {
			tb.Fatal(err)
		}
	}()
	if _, err := store.Create(ctx, st, &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}); err != nil {
		tb.Fatal(err)
	}
	ops := make([]store.Op, 0, seedBatch)
	flush := func() {
		results, err := st.Apply(ctx, ops...)
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range results {
			if r.Err != nil {
				tb.Fatal(r.Err)
			}
		}
		ops = ops[:0]
	}
	adm := admission.New(admission.Options{Mode: resource.ModeStandalone, Zone: "default"})
	for i := range n {
		obj := object(i)
		// Admit fails if the labels are not those the API would set.
		if errs := adm.Admit(obj, admission.Writer{Source: admission.System}); len(errs) > 0 {
			tb.Fatalf("seeded %s is not what the API would store: %v", obj.Name, errs)
		}
		ops = append(ops, store.Op{Type: store.OpCreate, Object: obj})
		if len(ops) == seedBatch {
			flush()
		}
	}
	if len(ops) > 0 {
		flush()
	}
}
