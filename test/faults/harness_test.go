// Package faults runs meshnames through the faults production meets that
// are not clean deaths: a database network that stops answering, a disk
// that fills, zones partitioned from their global while both sides take
// writes, proxies that never read, NACK everything or come and go in bulk,
// and kill -9 in the middle of everything, with real processes on
// loopback ports (and the embedded store in a child process of its own).
//
// Every test has a quick variant that `go test ./...` runs (CI), and a
// long one:
//
//	MESHNAMES_FAULTS_LONG=1 go test ./test/faults -run . -v -timeout 3h
//
// which runs them at the sizes docs/operations.md reports (#faults-survived).
// The binary is built once, without -race (the suites measure times).
package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/porttest"
)

// longEnv selects the long variants.
const longEnv = "MESHNAMES_FAULTS_LONG"

// long says whether the long variants run.
func long() bool { return os.Getenv(longEnv) != "" }

// pick returns quick, or longer with MESHNAMES_FAULTS_LONG.
func pick[T any](quick, longer T) T {
	if long() {
		return longer
	}
	return quick
}

var binary string

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		os.Exit(crashChild(dir)) // a child of TestKill9Cycles
	}
	dir, err := os.MkdirTemp("", "meshnames-faults")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "meshnames")
	build := exec.Command("go", "build", "-o", binary, "github.com/meshnames/meshnames/cmd/meshnames")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building meshnames:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// addr returns a free loopback host:port.
func addr(t *testing.T) string {
	t.Helper()
	p, err := porttest.Free()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p)
}

// logBuffer is a process's log, safe for its writer and the test.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// server is one `meshnames serve` process.
type server struct {
	t    *testing.T
	name string
	args []string
	env  []string // added to the test's environment
	api  string   // http://host:port
	dns  string   // host:port
	cmd  *exec.Cmd
	log  *logBuffer
	done chan struct{}
	err  error
}

// serve starts `meshnames serve` with args, a free API and DNS address and
// (unless args name one) a data directory of its own.
func serve(t *testing.T, name string, args ...string) *server {
	t.Helper()
	return serveEnv(t, name, nil, args...)
}

// serveEnv is serve with env (KEY=VALUE) added to the process's
// environment.
func serveEnv(t *testing.T, name string, env []string, args ...string) *server {
	t.Helper()
	s := &server{t: t, name: name, api: addr(t), dns: addr(t), log: &logBuffer{}, env: env}
	if !slices.Contains(args, "--data-dir") {
		args = append(args, "--data-dir", t.TempDir())
	}
	if !slices.Contains(args, "--xds-addr") {
		// no xDS unless asked for: most faults here are the API's, the
		// store's and the sync's
		args = append(args, "--xds-addr", "")
	}
	s.args = append([]string{"serve", "--api-addr", s.api, "--dns-addr", s.dns, "--log-level", "info"}, args...)
	s.api = "http://" + s.api
	s.launch()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("--- log of %s (all of it in %s):\n%s", name, s.keepLog(), tail(s.log.String(), 200))
		}
	})
	return s
}

// keepLog writes the whole log to a file that outlives the test, and
// returns its path.
func (s *server) keepLog() string {
	dir := filepath.Join(os.TempDir(), "meshnames-faults", strings.ReplaceAll(s.t.Name(), "/", "_"))
	path := filepath.Join(dir, s.name+".log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err.Error()
	}
	if err := os.WriteFile(path, []byte(s.log.String()), 0o644); err != nil {
		return err.Error()
	}
	return path
}

// dumpStacks makes the processes write their goroutines' stacks to their
// logs (SIGQUIT) and exit, all at once, so that each shows where it waited
// while the others were there: what a test that failed waiting shows.
func dumpStacks(servers []*server) {
	for _, s := range servers {
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	}
	for _, s := range servers {
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("(%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// launch starts the process (again, after a kill: same ports, same data).
func (s *server) launch() {
	s.t.Helper()
	s.cmd = exec.Command(binary, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if s.env != nil {
		s.cmd.Env = append(os.Environ(), s.env...)
	}
	s.done = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", s.name, err)
	}
	cmd, done := s.cmd, s.done
	go func() {
		s.err = cmd.Wait()
		close(done)
	}()
}

// restart kills the process with SIGKILL and starts it again.
func (s *server) restart() {
	s.kill()
	s.launch()
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// ready polls /readyz until it answers 200.
func (s *server) ready(within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			s.t.Fatalf("%s exited before it was ready: %v\n%s", s.name, s.err, tail(s.log.String(), 50))
		default:
		}
		if code, _, err := call(http.MethodGet, s.api+"/readyz", nil); err == nil && code == http.StatusOK {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("%s not ready after %s", s.name, within)
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// call sends a request with a JSON body (nil for none) and returns the
// status and the body.
func call(method, url string, body any) (int, []byte, error) {
	return callCtx(context.Background(), method, url, body)
}

func callCtx(ctx context.Context, method, url string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// meshService is a MeshService document with one port.
func meshService(name string, port int, labels map[string]string) map[string]any {
	return map[string]any{"type": "MeshService", "name": name, "mesh": "default", "labels": labels,
		"spec": map[string]any{"ports": []map[string]any{{"port": port, "appProtocol": "http"}}}}
}

func msPath(name string) string { return "/meshes/default/meshservices/" + name }

// view is what the tests read of a MeshService.
type view struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Spec   struct {
		Ports []struct {
			Port int `json:"port"`
		} `json:"ports"`
	} `json:"spec"`
	Status struct {
		VIPs []struct {
			IP string `json:"ip"`
		} `json:"vips"`
	} `json:"status"`
}

// list pages through every MeshService of mesh default on api.
func list(api string) (map[string]*view, error) { return listKind(api, "meshservices") }

// listKind pages through every resource of a kind (its plural) of mesh
// default on api.
func listKind(api, plural string) (map[string]*view, error) {
	out := map[string]*view{}
	for offset := 0; ; {
		code, b, err := call(http.MethodGet, fmt.Sprintf("%s/meshes/default/%s?size=1000&offset=%d", api, plural, offset), nil)
		if err != nil {
			return nil, err
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("list: HTTP %d: %s", code, b)
		}
		var page struct {
			Total int     `json:"total"`
			Items []*view `json:"items"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			out[it.Name] = it
		}
		offset += len(page.Items)
		if len(page.Items) == 0 || offset >= page.Total {
			return out, nil
		}
	}
}

// metric returns the value of the series named exactly series (with its
// labels, as /metrics writes them) on s.
func (s *server) metric(series string) (float64, error) {
	m, err := s.metrics(series)
	return m[series], err
}

// metrics returns the values of the series named (each exactly, with its
// labels, as /metrics writes them) on s, from one read of /metrics.
func (s *server) metrics(series ...string) (map[string]float64, error) {
	code, b, err := call(http.MethodGet, s.api+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", code)
	}
	out := make(map[string]float64, len(series))
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || !slices.Contains(series, name) {
			continue
		}
		var f float64
		if _, err := fmt.Sscan(v, &f); err != nil {
			return nil, fmt.Errorf("/metrics: %s: %w", name, err)
		}
		out[name] = f
	}
	for _, name := range series {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("/metrics has no %s", name)
		}
	}
	return out, nil
}

// waitFor polls cond every 20 ms until it holds, failing after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
