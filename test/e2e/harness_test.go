// Package e2e runs real meshnames processes on loopback ports and checks
// what users see: durability across kill -9, exclusive data directories,
// clean shutdown, and several instances sharing one PostgreSQL.
//
// TestMain builds the binary once, with -race when the tests run with it.
// Each process's log is kept and printed when a test fails. Tests without
// a timing bound that other processes on the machine could break run in
// parallel, after those with one (failover times, DNS within 100 ms).
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	// The tests run a binary built in TestMain, which Go's test cache cannot
	// see; importing the command's code makes any change to it invalidate
	// cached results of this package.
	_ "github.com/meshnames/meshnames/internal/cli"

	"github.com/meshnames/meshnames/internal/porttest"
)

var binary string

// grpcecho is examples/grpcecho, built in TestMain: the proxyless gRPC
// server and xDS client of the xDS tests and the README.
var grpcecho string

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "dig" {
		// The README walkthrough runs this binary as dig when dig is
		// not installed (see digMain).
		os.Exit(digMain(os.Args[1:], os.Stdout))
	}
	dir, err := os.MkdirTemp("", "meshnames-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "meshnames")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/meshnames/meshnames/cmd/meshnames")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building meshnames:", err)
		os.Exit(1)
	}
	grpcecho = filepath.Join(dir, "grpcecho")
	build = exec.Command("go", "build", "-o", grpcecho, "github.com/meshnames/meshnames/examples/grpcecho")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building grpcecho:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopKube()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port that was free a moment ago
// (porttest.Free).
func freePort(t *testing.T) int {
	t.Helper()
	p, err := porttest.Free()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuffer is a log sink safe for the process's writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is one running meshnames process.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	log  *syncBuffer
	api  string // http://127.0.0.1:port
	dns  string // 127.0.0.1:port (UDP and TCP)
	xds  string // 127.0.0.1:port (ADS, gRPC)
	done chan struct{}
	err  error
}

// start runs `meshnames serve` with args plus a free API and DNS port.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	api := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dnsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	xdsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	if !slices.Contains(args, "--data-dir") {
		// The first start writes admin.token into the data directory, also
		// on PostgreSQL: keep it out of the working directory.
		args = append(args, "--data-dir", t.TempDir())
	}
	args = append([]string{"serve", "--api-addr", api, "--dns-addr", dnsAddr, "--xds-addr", xdsAddr, "--log-level", "debug"}, args...)
	p := &proc{t: t, name: name, log: &syncBuffer{}, api: "http://" + api, dns: dnsAddr, xds: xdsAddr, done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- log of %s (%s):\n%s", name, p.cmd, p.log.String())
		}
	})
	return p
}

// waitReady polls /readyz until it answers 200.
func (p *proc) waitReady(timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			p.t.Fatalf("%s exited before it was ready: %v\n%s", p.name, p.err, p.log.String())
		default:
		}
		resp, err := http.Get(p.api + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("%s not ready after %s", p.name, timeout)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop sends SIGTERM and returns the exit error.
func (p *proc) stop(timeout time.Duration) error {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.t.Fatalf("%s did not stop within %s after SIGTERM", p.name, timeout)
		return nil
	}
}

// wait waits for the process to exit on its own.
func (p *proc) wait(timeout time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.t.Fatalf("%s still running after %s", p.name, timeout)
		return nil
	}
}

// run runs a client command of the binary and returns its output.
func run(t *testing.T, ctx context.Context, stdin []byte, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err = cmd.Run()
	return o.String(), e.String(), err
}

func itoa(i int) string { return strconv.Itoa(i) }

func writeFile(path, body string) error { return os.WriteFile(path, []byte(body), 0o600) }
