package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lines is the output of a process, line by line, as it comes.
type lines struct {
	mu   sync.Mutex
	all  []string
	more chan struct{}
}

func readLines(r io.Reader) *lines {
	l := &lines{more: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
		close(l.more)
	}()
	return l
}

// waitFor waits until ok holds of the lines after from (an index), and
// returns the index after the line where it did.
func (l *lines) waitFor(t *testing.T, what string, from int, timeout time.Duration, ok func([]string) (int, bool)) int {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		got := append([]string(nil), l.all[min(from, len(l.all)):]...)
		l.mu.Unlock()
		if n, done := ok(got); done {
			return from + n
		}
		select {
		case _, open := <-l.more:
			if !open {
				l.mu.Lock()
				got := append([]string(nil), l.all[min(from, len(l.all)):]...)
				l.mu.Unlock()
				if n, done := ok(got); done {
					return from + n
				}
				t.Fatalf("%s: the process ended; its last lines: %q", what, tail(got, 10))
			}
		case <-deadline:
			t.Fatalf("%s: not within %s; the last lines: %q", what, timeout, tail(got, 10))
		}
	}
}

func tail(xs []string, n int) []string { return xs[max(0, len(xs)-n):] }

// startEcho runs `grpcecho serve` on a free port as id and returns the port.
func startEcho(t *testing.T, id string) int {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(grpcecho, "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--id", id)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	readLines(out).waitFor(t, "grpcecho serve "+id, 0, 10*time.Second, func(ls []string) (int, bool) {
		return len(ls), len(ls) > 0 && strings.HasPrefix(ls[0], "serving ")
	})
	return port
}

// startCaller runs `grpcecho call --count 0` against target with a
// bootstrap naming the server's ADS, the node id and the token (node
// metadata, as grpc-go sends it), and returns its output lines.
func startCaller(t *testing.T, xdsAddr, node, token, target string) *lines {
	t.Helper()
	meta := ""
	if token != "" {
		meta = fmt.Sprintf(`,"metadata":{"token":%q}`, token)
	}
	boot := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := writeFile(boot, fmt.Sprintf(`{"xds_servers":[{"server_uri":%q,"channel_creds":[{"type":"insecure"}],"server_features":["xds_v3"]}],"node":{"id":%q%s}}`, xdsAddr, node, meta)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(grpcecho, "call", "--count", "0", "--interval", "20ms", "--timeout", "2s", target)
	cmd.Env = append(cmd.Environ(), "GRPC_XDS_BOOTSTRAP="+boot)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return readLines(out)
}

const echoDataplane = `type: Dataplane
mesh: default
name: %s
networking:
  address: 127.0.0.1
  inbound:
  - port: %d
    name: grpc
    state: %s
    tags:
      kuma.io/service: echo-backend
`

// TestXDS_ProxylessGRPC runs the proxyless path with real processes: a
// meshnames server, two grpcecho servers registered as Dataplane
// inbounds, and grpcecho callers whose grpc-go xDS client reads a
// bootstrap naming meshnames' ADS, their node id and dataplane token.
func TestXDS_ProxylessGRPC(t *testing.T) {
	p := start(t, "server")
	p.waitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	apply := func(doc string) {
		t.Helper()
		if _, stderr, err := run(t, ctx, []byte(doc), "apply", "-f", "-", "--server", p.api); err != nil {
			t.Fatalf("apply: %v\n%s\n%s", err, stderr, doc)
		}
	}
	a, b := startEcho(t, "echo-a"), startEcho(t, "echo-b")
	apply(fmt.Sprintf(echoDataplane, "echo-a", a, "Ready") + "---\n" + fmt.Sprintf(echoDataplane, "echo-b", b, "Ready") + `---
type: Dataplane
mesh: default
name: client
networking:
  address: 127.0.0.1
---
type: MeshService
mesh: default
name: echo
spec:
  selector:
    dataplaneTags:
      kuma.io/service: echo-backend
  ports:
  - port: 8080
    targetPort: grpc
    appProtocol: grpc
`)
	tok, stderr, err := run(t, ctx, nil, "token", "dataplane", "--name", "client", "--server", p.api)
	if err != nil {
		t.Fatalf("token dataplane: %v\n%s", err, stderr)
	}
	tok = strings.TrimSpace(tok)

	calls := startCaller(t, p.xds, "default.client", tok, "xds:///echo.svc.mesh.local:8080")
	seen := map[string]bool{}
	next := calls.waitFor(t, "both backends answer", 0, 30*time.Second, func(ls []string) (int, bool) {
		for i, l := range ls {
			seen[l] = true
			if seen["echo-a"] && seen["echo-b"] {
				return i + 1, true
			}
		}
		return len(ls), false
	})

	// echo-b NotReady: every call goes to echo-a (twenty in a row).
	apply(fmt.Sprintf(echoDataplane, "echo-b", b, "NotReady"))
	next = calls.waitFor(t, "NotReady echo-b takes no calls", next, 30*time.Second, func(ls []string) (int, bool) {
		run := 0
		for i, l := range ls {
			if l == "echo-a" {
				run++
			} else {
				run = 0
			}
			if run == 20 {
				return i + 1, true
			}
		}
		return 0, false
	})

	// A service created while the client runs is callable at once.
	late := startEcho(t, "late-1")
	apply(fmt.Sprintf(echoDataplane, "late-1", late, "Ready") + `---
type: MeshService
mesh: default
name: late
spec:
  selector:
    dataplaneRef:
      name: late-1
  ports:
  - port: 7070
    targetPort: grpc
    appProtocol: grpc
`)
	lateCalls := startCaller(t, p.xds, "default.client", tok, "xds:///late.svc.mesh.local:7070")
	lateCalls.waitFor(t, "the new service answers", 0, 30*time.Second, func(ls []string) (int, bool) {
		for i, l := range ls {
			if l == "late-1" {
				return i + 1, true
			}
		}
		return 0, false
	})

	// Deleting echo fails the client's next calls with a status that
	// names what is gone.
	if _, stderr, err := run(t, ctx, nil, "delete", "meshservice", "echo", "--server", p.api); err != nil {
		t.Fatalf("delete: %v\n%s", err, stderr)
	}
	calls.waitFor(t, "the deleted service fails", next, 30*time.Second, func(ls []string) (int, bool) {
		for i, l := range ls {
			if strings.HasPrefix(l, "error:") && strings.Contains(l, "echo.svc.mesh.local:8080") {
				return i + 1, true
			}
		}
		return 0, false
	})

	// A token of another Dataplane is refused, and the caller says so.
	other, _, err := run(t, ctx, nil, "token", "dataplane", "--name", "echo-a", "--server", p.api)
	if err != nil {
		t.Fatal(err)
	}
	bad := startCaller(t, p.xds, "default.client", strings.TrimSpace(other), "xds:///late.svc.mesh.local:7070")
	bad.waitFor(t, "a token of another dataplane is refused", 0, 30*time.Second, func(ls []string) (int, bool) {
		for i, l := range ls {
			if strings.HasPrefix(l, "error:") && strings.Contains(l, "the token is for dataplane default/echo-a") {
				return i + 1, true
			}
		}
		return 0, false
	})

	// inspect xds shows the caller's stream and what it ACKed.
	out, stderr, err := run(t, ctx, nil, "inspect", "xds", "default/client", "--server", p.api)
	if err != nil {
		t.Fatalf("inspect xds: %v\n%s", err, stderr)
	}
	for _, want := range []string{"protocol: sotw", "type: LDS", "ackedVersion:", "name: late.svc.mesh.local:7070", "late_msvc_7070"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect xds lacks %q:\n%s", want, out)
		}
	}
}
