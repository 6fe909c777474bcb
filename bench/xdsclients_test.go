package bench

// The benchmark's side of bench/xdsload: the load generator built once,
// run as a process of its own, and its lines read.

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	xdsloadOnce sync.Once
	xdsloadPath string
	xdsloadErr  error
)

// xdsloadBinary builds bench/xdsload once, beside the meshnames binary
// (removed by TestMain).
func xdsloadBinary(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Dir(meshnamesBinary(tb))
	xdsloadOnce.Do(func() {
		xdsloadPath = filepath.Join(dir, "xdsload")
		out, err := exec.Command("go", "build", "-o", xdsloadPath, "github.com/meshnames/meshnames/bench/xdsload").CombinedOutput()
		if err != nil {
			xdsloadErr = fmt.Errorf("go build xdsload: %v\n%s", err, out)
		}
	})
	if xdsloadErr != nil {
		tb.Fatal(xdsloadErr)
	}
	return xdsloadPath
}

// xdsClients is a running xdsload: n proxies on delta ADS streams.
type xdsClients struct {
	tb    testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []string // fields of each output line; closed when it exits
	log   *logFile
	n     int
}

// firstConfig is one proxy's first complete config.
type firstConfig struct {
	took                            time.Duration
	clusters, assignments, listener int
}

// startXDSClients runs xdsload with n proxies <prefix>0..n-1 of mesh
// default against the ADS address, concurrency of them connecting at once.
func startXDSClients(tb testing.TB, addr, prefix string, n, concurrency int) *xdsClients {
	tb.Helper()
	x := &xdsClients{tb: tb, log: newLogFile(tb), lines: make(chan []string, 4096), n: n}
	x.cmd = exec.Command(xdsloadBinary(tb), "-addr", addr, "-mesh", "default", "-prefix", prefix,
		"-n", strconv.Itoa(n), "-concurrency", strconv.Itoa(concurrency))
	x.cmd.Stderr = x.log.f
	var err error
	if x.in, err = x.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	out, err := x.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := x.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		defer close(x.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			x.lines <- strings.Fields(sc.Text())
		}
	}()
	tb.Cleanup(func() {
		_ = x.in.Close()
		_ = x.cmd.Process.Kill()
		_ = x.cmd.Wait()
		if tb.Failed() {
			tb.Logf("--- stderr of xdsload:\n%s", x.log.String())
		}
	})
	return x
}

// next returns the next line that is not an error, failing on an error
// line, on xdsload's exit and after timeout.
func (x *xdsClients) next(timeout time.Duration, waiting string) []string {
	x.tb.Helper()
	select {
	case f, ok := <-x.lines:
		if !ok {
			x.tb.Fatalf("xdsload exited while %s", waiting)
		}
		if len(f) > 0 && f[0] == "error" {
			x.tb.Fatalf("xdsload: proxy-%s: %s", f[1], strings.Join(f[2:], " "))
		}
		return f
	case <-time.After(timeout):
		x.tb.Fatalf("nothing from xdsload for %s while %s", timeout, waiting)
	}
	return nil
}

// connected waits until every proxy has its first config and returns
// them in the order they completed.
func (x *xdsClients) connected(timeout time.Duration) []firstConfig {
	x.tb.Helper()
	var out []firstConfig
	for {
		f := x.next(timeout, fmt.Sprintf("connecting (%d of %d configured)", len(out), x.n))
		switch f[0] {
		case "connected":
			return out
		case "config":
			v := ints(x.tb, f[2:])
			out = append(out, firstConfig{took: time.Duration(v[1] - v[0]), clusters: int(v[2]), assignments: int(v[3]), listener: int(v[4])})
		}
	}
}

// watch tells every proxy to watch for resource name and returns once
// the watch is set.
func (x *xdsClients) watch(name string) {
	x.tb.Helper()
	x.command("watch " + name)
	for f := x.next(10*time.Second, "setting a watch"); f[0] != "watching" || f[1] != name; f = x.next(10*time.Second, "setting a watch") {
	}
}

func (x *xdsClients) command(line string) {
	x.tb.Helper()
	if _, err := io.WriteString(x.in, line+"\n"); err != nil {
		x.tb.Fatal(err)
	}
}

// seen waits until every proxy has received name and returns when each
// did (its ACK sent), and their versions of it.
func (x *xdsClients) seen(name string, timeout time.Duration) ([]time.Time, map[string]int) {
	x.tb.Helper()
	at := make([]time.Time, x.n)
	versions := map[string]int{}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			x.command("status " + name)
			for f := x.next(10*time.Second, "asking for status"); ; f = x.next(10*time.Second, "asking for status") {
				if f[0] == "status" && f[1] == name {
					x.tb.Fatalf("%s of %d proxies received %s within %s", f[2], x.n, name, timeout)
				}
			}
		}
		select {
		case f, ok := <-x.lines:
			if !ok {
				x.tb.Fatalf("xdsload exited while waiting for %s", name)
			}
			switch {
			case f[0] == "error":
				x.tb.Fatalf("xdsload: proxy-%s: %s", f[1], strings.Join(f[2:], " "))
			case f[0] == "seen" && f[1] == name:
				v := ints(x.tb, f[2:4])
				at[v[0]] = time.Unix(0, v[1])
				versions[f[4]]++
			case f[0] == "done" && f[1] == name:
				return at, versions
			}
		case <-time.After(left):
		}
	}
}

func ints(tb testing.TB, fs []string) []int64 {
	tb.Helper()
	out := make([]int64, len(fs))
	for i, s := range fs {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			tb.Fatalf("xdsload: %q is no number", s)
		}
		out[i] = v
	}
	return out
}
