// Package xdsloadtest is the tests' side of bench/xdsload: the load
// generator built once per test process, run as a process of its own, and
// its lines read. BenchmarkXDS (bench) and TestHostileProxies
// (test/faults) drive their simulated proxies with it.
//
// It imports nothing of meshnames; a Clients is used by one test
// goroutine.
package xdsloadtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Build builds bench/xdsload into dir, once per test process, and returns
// its path.
func Build(tb testing.TB, dir string) string {
	tb.Helper()
	buildOnce.Do(func() {
		buildPath = filepath.Join(dir, "xdsload")
		out, err := exec.Command("go", "build", "-o", buildPath, "github.com/meshnames/meshnames/bench/xdsload").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build xdsload: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return buildPath
}

// Options are an xdsload's flags.
type Options struct {
	Addr   string // the ADS address
	Prefix string // the proxies are the Dataplanes <Prefix><i> of mesh default
	N      int
	// Concurrency: how many connect at once (0: 1).
	Concurrency int
	// Role is ack (""), nack, silent or churn (see bench/xdsload).
	Role string
	// Churn and Rate: churn's connections in all, and a second.
	Churn int
	Rate  float64
}

// Clients is a running xdsload.
type Clients struct {
	tb    testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []string // fields of each output line; closed when it exits
	log   *os.File
	n     int
	done  chan struct{}
}

// FirstConfig is one proxy's first complete config.
type FirstConfig struct {
	Took                            time.Duration
	Clusters, Assignments, Listener int
}

// Start runs xdsload (built by Build at bin) with o; it ends with the
// test, or at Stop.
func Start(tb testing.TB, bin string, o Options) *Clients {
	tb.Helper()
	log, err := os.CreateTemp(tb.TempDir(), "xdsload-*.log")
	if err != nil {
		tb.Fatal(err)
	}
	x := &Clients{tb: tb, log: log, lines: make(chan []string, 4096), n: o.N, done: make(chan struct{})}
	args := []string{"-addr", o.Addr, "-mesh", "default", "-prefix", o.Prefix,
		"-n", strconv.Itoa(o.N), "-concurrency", strconv.Itoa(max(o.Concurrency, 1))}
	if o.Role != "" {
		args = append(args, "-role", o.Role)
	}
	if o.Churn > 0 {
		args = append(args, "-churn", strconv.Itoa(o.Churn), "-rate", strconv.FormatFloat(o.Rate, 'f', -1, 64))
	}
	x.cmd = exec.Command(bin, args...)
	x.cmd.Stderr = log
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
		x.Stop()
		if tb.Failed() {
			b, _ := os.ReadFile(log.Name())
			tb.Logf("--- stderr of xdsload %s:\n%s", o.Prefix, b)
		}
		_ = log.Close()
	})
	return x
}

// Pid is the process's id.
func (x *Clients) Pid() int { return x.cmd.Process.Pid }

// Stop kills the process (its proxies' connections end with it) and
// waits for it.
func (x *Clients) Stop() {
	select {
	case <-x.done:
		return
	default:
	}
	close(x.done)
	_ = x.in.Close()
	_ = x.cmd.Process.Kill()
	_ = x.cmd.Wait()
}

// next returns the next line that is not an error, failing on an error
// line, on xdsload's exit and after timeout.
func (x *Clients) next(timeout time.Duration, waiting string) []string {
	x.tb.Helper()
	select {
	case f, ok := <-x.lines:
		if !ok {
			x.tb.Fatalf("xdsload exited while %s", waiting)
		}
		if len(f) > 0 && f[0] == "error" {
			x.tb.Fatalf("xdsload: proxy %s: %s", f[1], strings.Join(f[2:], " "))
		}
		return f
	case <-time.After(timeout):
		x.tb.Fatalf("nothing from xdsload for %s while %s", timeout, waiting)
	}
	return nil
}

// Connected waits until every proxy has its first config (silent ones:
// has subscribed) and returns the configs in the order they completed.
func (x *Clients) Connected(timeout time.Duration) []FirstConfig {
	x.tb.Helper()
	var out []FirstConfig
	for {
		f := x.next(timeout, fmt.Sprintf("connecting (%d of %d configured)", len(out), x.n))
		switch f[0] {
		case "connected":
			return out
		case "config":
			v := ints(x.tb, f[2:])
			out = append(out, FirstConfig{Took: time.Duration(v[1] - v[0]), Clusters: int(v[2]), Assignments: int(v[3]), Listener: int(v[4])})
		}
	}
}

// Churned waits for a churn to end and returns how many connections it
// made, how many of them failed, and how long it took.
func (x *Clients) Churned(timeout time.Duration) (made, failed int, took time.Duration) {
	x.tb.Helper()
	for {
		if f := x.next(timeout, "churning"); f[0] == "churned" {
			v := ints(x.tb, f[1:3])
			s, err := strconv.ParseFloat(f[3], 64)
			if err != nil {
				x.tb.Fatalf("xdsload: %q is no number", f[3])
			}
			return int(v[0]), int(v[1]), time.Duration(s * float64(time.Second))
		}
	}
}

// Watch tells every proxy to watch for resource name and returns once
// the watch is set.
func (x *Clients) Watch(name string) {
	x.tb.Helper()
	x.command("watch " + name)
	for f := x.next(10*time.Second, "setting a watch"); f[0] != "watching" || f[1] != name; f = x.next(10*time.Second, "setting a watch") {
	}
}

func (x *Clients) command(line string) {
	x.tb.Helper()
	if _, err := io.WriteString(x.in, line+"\n"); err != nil {
		x.tb.Fatal(err)
	}
}

// Seen is when every proxy received a watched name.
type Seen struct {
	At []time.Time // by proxy, when it answered the response
	// Responses: by proxy, how many responses it had received then
	Responses []int
	Versions  map[string]int // how many proxies got each version
}

// Seen waits until every proxy has received name and returns when each
// did.
func (x *Clients) Seen(name string, timeout time.Duration) Seen {
	x.tb.Helper()
	s := Seen{At: make([]time.Time, x.n), Responses: make([]int, x.n), Versions: map[string]int{}}
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
				x.tb.Fatalf("xdsload: proxy %s: %s", f[1], strings.Join(f[2:], " "))
			case f[0] == "seen" && f[1] == name:
				v := ints(x.tb, f[2:4])
				s.At[v[0]] = time.Unix(0, v[1])
				s.Versions[f[4]]++
				s.Responses[v[0]] = int(ints(x.tb, f[5:6])[0])
			case f[0] == "done" && f[1] == name:
				return s
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
