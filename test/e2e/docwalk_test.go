package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The ports a page's commands may name without flags: the defaults of
// api.addr, dns.addr, sync.addr and xds.addr.
const (
	defaultAPIPort  = 5681
	defaultDNSPort  = 5653
	defaultSyncPort = 5685
	defaultXDSPort  = 5678
)

var (
	// portRef finds a port in a command or an output: after a loopback
	// host, or after dig's -p.
	portRef = regexp.MustCompile(`((?:127\.0\.0\.1|localhost):|-p )(\d{4,5})\b`)
	apiAddr = regexp.MustCompile(`--api-addr[ =](\S+)`)
	// readCmd matches the commands that change nothing: the walk may run
	// them again until the control plane has caught up with the writes
	// before them.
	readCmd  = regexp.MustCompile(`^(\w+=\S+ )*(\./)?meshnames( --\S+ \S+)* (get|inspect|version|audit)\b|^(dig|cat|kubectl get) |^curl -s (?:[^-]|-[^X])*$`)
	serveCmd = regexp.MustCompile(`^(\./)?meshnames serve\b`)
	// backgroundCmd matches the commands a page runs in a terminal of
	// their own: servers of the examples, which run until stopped.
	backgroundCmd = regexp.MustCompile(`^\./grpcecho serve\b`)
	// exampleBuild matches the build of an example program, which the
	// test built in TestMain.
	exampleBuild = regexp.MustCompile(`^go build -o (\S+) \./examples/(\S+)$`)
)

// docWalker runs one page's commands in a directory of their own.
type docWalker struct {
	t     *testing.T
	page  docPage
	dir   string
	ports map[int]int // the page's port -> a free one
	back  map[int]int
	env   []string
}

func newDocWalker(t *testing.T, p docPage, blocks []*docBlock) *docWalker {
	w := &docWalker{t: t, page: p, dir: t.TempDir(), ports: map[int]int{}, back: map[int]int{}}
	for _, port := range []int{defaultAPIPort, defaultDNSPort, defaultSyncPort, defaultXDSPort} {
		w.mapPort(port)
	}
	for _, port := range p.appPorts {
		w.mapPort(port)
	}
	for _, b := range blocks {
		texts := b.content // a file's: its addresses point at the walk's ports too
		if b.file == "" {
			texts = nil
			for _, s := range b.steps {
				texts = append(texts, s.cmd)
			}
		}
		for _, text := range texts {
			for _, m := range portRef.FindAllStringSubmatch(text, -1) {
				port, _ := strconv.Atoi(m[2])
				w.mapPort(port)
			}
		}
	}
	// The binary as ./meshnames (the README's) and as meshnames on PATH
	// (the docs'); docs/ as in the repository, for the files it ships.
	bin := t.TempDir()
	for _, link := range []string{filepath.Join(w.dir, "meshnames"), filepath.Join(bin, "meshnames")} {
		if err := os.Symlink(binary, link); err != nil {
			t.Fatal(err)
		}
	}
	docs, err := filepath.Abs(filepath.Join("..", "..", "docs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(docs, filepath.Join(w.dir, "docs")); err != nil {
		t.Fatal(err)
	}
	path := bin + string(os.PathListSeparator) + os.Getenv("PATH")
	if _, err := exec.LookPath("dig"); err != nil {
		// This test binary answers as dig (see digMain); a real dig,
		// when installed, comes first on PATH.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(self, filepath.Join(bin, "dig")); err != nil {
			t.Fatal(err)
		}
	}
	w.env = []string{
		"PATH=" + path, "HOME=" + w.dir, "LANG=C.UTF-8", "TERM=dumb",
		"MESHNAMES_API_ADDR=127.0.0.1:" + itoa(w.ports[defaultAPIPort]),
		"MESHNAMES_DNS_ADDR=127.0.0.1:" + itoa(w.ports[defaultDNSPort]),
		"MESHNAMES_SYNC_ADDR=127.0.0.1:" + itoa(w.ports[defaultSyncPort]),
		"MESHNAMES_XDS_ADDR=127.0.0.1:" + itoa(w.ports[defaultXDSPort]),
		"MESHNAMES_SERVER=http://127.0.0.1:" + itoa(w.ports[defaultAPIPort]),
	}
	if p.kube {
		if _, err := exec.LookPath("kubectl"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("kubectl is not installed; %s uses it", p.path)
			}
			t.Skipf("kubectl is not installed; %s uses it", p.path)
		}
		c := kube(t)
		kc, err := os.ReadFile(c.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		w.writeFile(".kube/config", strings.Split(strings.TrimSuffix(string(kc), "\n"), "\n"))
	}
	if p.serve {
		if out, started := w.serve("meshnames serve", []string{elision}); !started {
			t.Fatalf("meshnames serve did not start:\n%s", strings.Join(out, "\n"))
		}
	}
	return w
}

// replacePort replaces the number from in s by to, where it is not part
// of a longer number (it may follow a letter or "_": echo_msvc_9001).
func replacePort(s string, from, to int) string {
	re := regexp.MustCompile(`(^|[^0-9])` + itoa(from) + `($|[^0-9])`)
	// Twice: a match consumes the character after it, which may begin
	// the next occurrence ("9001,9001").
	for range 2 {
		s = re.ReplaceAllString(s, "${1}"+itoa(to)+"${2}")
	}
	return s
}

func (w *docWalker) mapPort(port int) {
	if _, ok := w.ports[port]; ok {
		return
	}
	free := freePort(w.t)
	w.ports[port], w.back[free] = free, port
}

// toRun points a command (or a file's line) at the walk's ports.
func (w *docWalker) toRun(cmd string) string {
	cmd = portRef.ReplaceAllStringFunc(cmd, func(m string) string {
		sm := portRef.FindStringSubmatch(m)
		port, _ := strconv.Atoi(sm[2])
		if free, ok := w.ports[port]; ok {
			return sm[1] + itoa(free)
		}
		return m // not the page's: a kubeconfig's API server, say
	})
	for _, port := range w.page.appPorts {
		cmd = replacePort(cmd, port, w.ports[port])
	}
	return cmd
}

// shown turns output into what a user with the page's ports and a
// directory /tmp/walk sees.
func (w *docWalker) shown(out string) []string {
	out = portRef.ReplaceAllStringFunc(out, func(m string) string {
		sm := portRef.FindStringSubmatch(m)
		port, _ := strconv.Atoi(sm[2])
		if p, ok := w.back[port]; ok {
			return sm[1] + itoa(p)
		}
		return m
	})
	for _, port := range w.page.appPorts {
		out = replacePort(out, w.ports[port], port)
	}
	out = strings.ReplaceAll(out, w.dir, "/tmp/walk")
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func (w *docWalker) writeFile(name string, content []string) {
	path := filepath.Join(w.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		w.t.Fatal(err)
	}
	lines := make([]string, len(content))
	for i, l := range content {
		lines[i] = w.toRun(l)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// step runs one command of a transcript and returns its output.
func (w *docWalker) step(s *docStep) []string {
	switch m := exampleBuild.FindStringSubmatch(s.cmd); {
	case m != nil && m[2] == "grpcecho":
		if err := os.Symlink(grpcecho, filepath.Join(w.dir, m[1])); err != nil {
			w.t.Fatal(err)
		}
		return s.want
	case backgroundCmd.MatchString(s.cmd):
		return w.background(s.cmd, s.want)
	case strings.HasPrefix(s.cmd, "go build "):
		return s.want // the test built the binary; ./meshnames is it
	case serveCmd.MatchString(s.cmd):
		out, started := w.serve(s.cmd, s.want)
		if !started && len(s.want) > 0 && s.want[len(s.want)-1] == elision {
			// The page shows a server that keeps running.
			out = append(out, "(exited)")
		}
		return out
	case readCmd.MatchString(s.cmd):
		return w.read(s.cmd, s.want)
	}
	return w.run(s.cmd)
}

// run runs cmd with bash in the walk's directory and returns its output
// (standard output and error as a terminal interleaves them).
func (w *docWalker) run(cmd string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", w.toRun(cmd))
	c.Dir, c.Env = w.dir, w.env
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		w.t.Fatalf("run %q: %v", cmd, err)
	}
	return w.shown(out.String())
}

// read runs a command that changes nothing. Comparing, it runs it again
// until its output matches want, for up to 15 s; updating, until the
// output is the same twice in a row.
func (w *docWalker) read(cmd string, want []string) []string {
	deadline := time.Now().Add(15 * time.Second)
	got := w.run(cmd)
	for time.Now().Before(deadline) {
		if !*update && w.page.matches(want, got) {
			return got
		}
		time.Sleep(250 * time.Millisecond)
		again := w.run(cmd)
		if *update && slices.Equal(again, got) {
			return again
		}
		got = again
	}
	return got
}

// background runs cmd as in a terminal of its own until the test ends,
// and returns what it printed once it printed as many lines as want holds
// (or after 10 s).
func (w *docWalker) background(cmd string, want []string) []string {
	log := &syncBuffer{}
	c := exec.Command("bash", "-c", "exec "+w.toRun(cmd))
	c.Dir, c.Env = w.dir, w.env
	c.Stdout, c.Stderr = log, log
	if err := c.Start(); err != nil {
		w.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	w.t.Cleanup(func() {
		_ = c.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := w.shown(log.String())
		select {
		case <-done:
			return w.shown(log.String())
		default:
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serve runs `meshnames serve` in the background, as a terminal of its own
// does, until it answers /readyz, and returns its start log (see
// startLog) and true. A serve that exits instead returns its whole output,
// as a command run in the foreground, and false.
func (w *docWalker) serve(cmd string, want []string) ([]string, bool) {
	log := &syncBuffer{}
	run := w.toRun(cmd)
	c := exec.Command("bash", "-c", "exec "+run)
	c.Dir, c.Env = w.dir, w.env
	c.Stdout, c.Stderr = log, log
	if err := c.Start(); err != nil {
		w.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	api := "127.0.0.1:" + itoa(w.ports[defaultAPIPort])
	if m := apiAddr.FindStringSubmatch(run); m != nil {
		api = m[1]
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-done:
			return w.shown(log.String()), false
		default:
		}
		if resp, err := http.Get("http://" + api + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s not ready within 2 minutes:\n%s", cmd, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
		if w.t.Failed() {
			w.t.Logf("--- log of %s:\n%s", cmd, log.String())
		}
	})
	return w.startLog(log, want), true
}

// startLog returns a server's log once it has started: the lines that
// match one of want's, in want's order, then the others. Comparing, it
// waits until the log holds every line of want (in any order: parts start
// concurrently); updating, until the log has been quiet for a second.
func (w *docWalker) startLog(log *syncBuffer, want []string) []string {
	var lines []string
	for _, l := range want {
		if l != elision {
			lines = append(lines, l)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := w.shown(log.String())
		if *update {
			time.Sleep(time.Second)
			if again := w.shown(log.String()); slices.Equal(again, got) || time.Now().After(deadline) {
				ordered, _ := w.inOrderOf(lines, again)
				return ordered
			}
			continue
		}
		if ordered, ok := w.inOrderOf(lines, got); ok || time.Now().After(deadline) {
			return ordered
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inOrderOf orders the lines of got like those of want they match
// (normalised), followed by the lines of got that match none, and reports
// whether every line of want was matched.
func (w *docWalker) inOrderOf(want, got []string) ([]string, bool) {
	ng := w.page.normalizeLines(got)
	used := make([]bool, len(got))
	var out []string
	all := true
	for _, n := range w.page.normalizeLines(want) {
		found := false
		for i := range got {
			if !used[i] && ng[i] == n {
				used[i], found = true, true
				out = append(out, got[i])
				break
			}
		}
		all = all && found
	}
	for i := range got {
		if !used[i] {
			out = append(out, got[i])
		}
	}
	return out, all
}
