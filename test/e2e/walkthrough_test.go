package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the outputs of the README's walkthrough from a real run")

// The walkthrough is the README section with this heading, up to the next
// section.
const (
	readme      = "../../README.md"
	walkHeading = "## Five minutes with meshnames"
	fileMarker  = "<!-- file: "
)

// walkStep is one command of a transcript block and the output the README
// shows for it.
type walkStep struct {
	cmd   string   // the command as the shell gets it (continuations kept)
	lines []string // the README lines of the command
	want  []string // the output lines the README shows
}

// walkBlock is a fenced block of the walkthrough: a transcript of steps
// (lines starting with "$ "), or a file's content (a block after a
// <!-- file: NAME --> marker).
type walkBlock struct {
	start, end int // README lines of the content, between the fences
	file       string
	content    []string
	steps      []walkStep
}

// parseWalkthrough finds the walkthrough's blocks in the README's lines.
func parseWalkthrough(t *testing.T, lines []string) []*walkBlock {
	t.Helper()
	begin := slices.Index(lines, walkHeading)
	if begin < 0 {
		t.Fatalf("%s has no %q section", readme, walkHeading)
	}
	var blocks []*walkBlock
	file := ""
	for i := begin + 1; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			break
		}
		if name, ok := strings.CutPrefix(l, fileMarker); ok {
			file = strings.TrimSuffix(strings.TrimSpace(name), "-->")
			file = strings.TrimSpace(file)
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		b := &walkBlock{start: i + 1, end: end, file: file, content: lines[i+1 : end]}
		file = ""
		i = end
		if b.file != "" {
			blocks = append(blocks, b)
			continue
		}
		if len(b.content) == 0 || !strings.HasPrefix(b.content[0], "$ ") {
			continue // a block to read, not to run
		}
		for j := 0; j < len(b.content); {
			s := walkStep{lines: []string{b.content[j]}}
			cmd := strings.TrimPrefix(b.content[j], "$ ")
			for strings.HasSuffix(b.content[j], "\\") && j+1 < len(b.content) {
				j++
				s.lines = append(s.lines, b.content[j])
				cmd += "\n" + b.content[j]
			}
			s.cmd = cmd
			for j++; j < len(b.content) && !strings.HasPrefix(b.content[j], "$ "); j++ {
				s.want = append(s.want, b.content[j])
			}
			b.steps = append(b.steps, s)
		}
		blocks = append(blocks, b)
	}
	if len(blocks) < 5 {
		t.Fatalf("found %d blocks in the walkthrough; is the README's layout what this test expects?", len(blocks))
	}
	return blocks
}

// walkNormalizers make outputs comparable from run to run: times, ages,
// durations, process ids and DNS message ids change; so does the alignment
// of tables whose columns hold them.
var walkNormalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`\d{8}T\d{6}(\.\d+)?Z`), "<time>"}, // in label values
	{regexp.MustCompile(`dur=\S+`), "dur=<dur>"},
	{regexp.MustCompile(`\(pid \d+\)`), "(pid <pid>)"},
	{regexp.MustCompile(`id: \d+`), "id: <id>"},
	{regexp.MustCompile(`token=[0-9a-f]{16}`), "token=<id>"},
	{regexp.MustCompile(`\b\d+[smhd]\b`), "<age>"},
	{regexp.MustCompile(`[ \t]+`), " "},
}

func normalize(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		for _, n := range walkNormalizers {
			l = n.re.ReplaceAllString(l, n.with)
		}
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// walker runs the walkthrough's commands in a directory of their own, with
// the meshnames binary as ./meshnames, on free ports: the commands name
// the default ports, and their outputs show them.
type walker struct {
	t          *testing.T
	dir        string
	api, dns   string // free ports
	xds        string // free port
	env        []string
	server     *exec.Cmd
	serverLog  *syncBuffer
	serverDone chan struct{}
}

// toRun points a command at the walk's ports.
func (w *walker) toRun(cmd string) string {
	cmd = strings.ReplaceAll(cmd, "127.0.0.1:5681", "127.0.0.1:"+w.api)
	cmd = strings.ReplaceAll(cmd, "127.0.0.1:5678", "127.0.0.1:"+w.xds)
	return strings.ReplaceAll(cmd, "-p 5653", "-p "+w.dns)
}

// shown turns output into what a user with the default ports and a
// directory /tmp/walk sees.
func (w *walker) shown(out string) []string {
	out = strings.ReplaceAll(out, "127.0.0.1:"+w.api, "127.0.0.1:5681")
	out = strings.ReplaceAll(out, "127.0.0.1:"+w.dns, "127.0.0.1:5653")
	out = strings.ReplaceAll(out, "127.0.0.1:"+w.xds, "127.0.0.1:5678")
	out = strings.ReplaceAll(out, w.dir, "/tmp/walk")
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// run runs cmd with bash in the walk's directory and returns its output
// (standard output and error as a terminal interleaves them).
func (w *walker) run(cmd string) []string {
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

// startServer runs `./meshnames serve` in the background, as the user's
// first terminal does, and waits until it is ready.
func (w *walker) startServer(cmd string) {
	w.serverLog = &syncBuffer{}
	w.server = exec.Command("bash", "-c", "exec "+w.toRun(cmd))
	w.server.Dir, w.server.Env = w.dir, w.env
	w.server.Stdout, w.server.Stderr = w.serverLog, w.serverLog
	if err := w.server.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.serverDone = make(chan struct{})
	go func() { _ = w.server.Wait(); close(w.serverDone) }()
	w.t.Cleanup(func() {
		_ = w.server.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.serverDone:
		case <-time.After(30 * time.Second):
			_ = w.server.Process.Kill()
			<-w.serverDone
		}
		if w.t.Failed() {
			w.t.Logf("--- log of %s:\n%s", cmd, w.serverLog.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + w.api + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-w.serverDone:
			w.t.Fatalf("%s exited:\n%s", cmd, w.serverLog.String())
		default:
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s not ready within 60 s:\n%s", cmd, w.serverLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reads are the commands that change nothing: the walk may run them again
// until the control plane has caught up with the writes before them.
func reads(cmd string) bool {
	for _, p := range []string{"./meshnames get ", "./meshnames inspect ", "./meshnames version", "dig ", "cat ", "curl -s \""} {
		if strings.HasPrefix(cmd, p) {
			return true
		}
	}
	return false
}

// TestWalkthrough_README runs the commands of the README's walkthrough
// against a real `meshnames serve` on free ports, in a directory of their
// own, and compares their outputs with the README's, after normalising
// times, ages, durations, process and DNS ids (and the columns they
// align). Files shown in <!-- file: NAME --> blocks are written first. A
// command that only reads is run again, for up to 15 s, until its output
// matches: the controllers name what a write created asynchronously.
//
// With -update it rewrites the outputs in the README that differ from the
// run's (a read's output once it is the same twice in a row), leaving
// commands, prose and outputs that differ only in times, ages and ids
// alone: change a command or a file in the README, or the behaviour, run
// -update, and read the diff.
func TestWalkthrough_README(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is not installed; the README walkthrough uses it")
		}
		t.Skip("curl is not installed; the README walkthrough uses it")
	}
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	blocks := parseWalkthrough(t, lines)

	w := &walker{t: t, dir: t.TempDir(), api: itoa(freePort(t)), dns: itoa(freePort(t)), xds: itoa(freePort(t))}
	if err := os.Symlink(binary, filepath.Join(w.dir, "meshnames")); err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("PATH")
	if _, err := exec.LookPath("dig"); err != nil {
		// This test binary answers as dig (see digMain); a real dig,
		// when installed, comes first on PATH.
		shim := t.TempDir()
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(self, filepath.Join(shim, "dig")); err != nil {
			t.Fatal(err)
		}
		path += string(os.PathListSeparator) + shim
	}
	w.env = []string{
		"PATH=" + path, "HOME=" + w.dir, "LANG=C.UTF-8", "TERM=dumb",
		"MESHNAMES_API_ADDR=127.0.0.1:" + w.api, "MESHNAMES_DNS_ADDR=127.0.0.1:" + w.dns,
		"MESHNAMES_XDS_ADDR=127.0.0.1:" + w.xds,
		"MESHNAMES_SERVER=http://127.0.0.1:" + w.api,
	}

	mismatches := 0
	for _, b := range blocks {
		if b.file != "" {
			body := strings.Join(b.content, "\n") + "\n"
			if err := os.WriteFile(filepath.Join(w.dir, b.file), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for i := range b.steps {
			s := &b.steps[i]
			var got []string
			anyOrder := false // the server's start: its parts log concurrently
			switch {
			case strings.HasPrefix(s.cmd, "go build "):
				// The test built the binary; ./meshnames is it.
			case s.cmd == "./meshnames serve" && w.server == nil:
				w.startServer(s.cmd)
				got, anyOrder = w.serverStartLog(s.want), true
			case reads(s.cmd):
				got = w.read(s.cmd, s.want)
			default:
				got = w.run(s.cmd)
			}
			if *update {
				// Keep what the README shows when only times, ages
				// and ids differ, so that a rewrite shows real changes.
				if ordered, all := inOrderOf(s.want, got); anyOrder && all && len(ordered) == len(s.want) {
					got = ordered
				}
				if !slices.Equal(normalize(s.want), normalize(got)) {
					s.want = got
				}
				continue
			}
			if d := cmp.Diff(normalize(s.want), normalize(got)); d != "" {
				mismatches++
				t.Errorf("$ %s\noutput differs from the README (-README +run, normalised); run with -update to rewrite:\n%s", s.cmd, d)
			}
		}
	}
	if *update {
		var out []string
		last := 0
		for _, b := range blocks {
			out = append(out, lines[last:b.start]...)
			if b.file != "" {
				out = append(out, b.content...)
			} else {
				for _, s := range b.steps {
					out = append(append(out, s.lines...), s.want...)
				}
			}
			last = b.end
		}
		out = append(out, lines[last:]...)
		if err := os.WriteFile(readme, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if mismatches > 0 {
		t.Logf("%d command(s) differ; the outputs above are what a user gets", mismatches)
	}
}

// read runs a command that changes nothing. Comparing, it runs it again
// until its output matches want, for up to 15 s; updating, until the
// output is the same twice in a row.
func (w *walker) read(cmd string, want []string) []string {
	deadline := time.Now().Add(15 * time.Second)
	got := w.run(cmd)
	for time.Now().Before(deadline) {
		if !*update && slices.Equal(normalize(got), normalize(want)) {
			return got
		}
		time.Sleep(250 * time.Millisecond)
		again := w.run(cmd)
		if *update && slices.Equal(normalize(again), normalize(got)) {
			return again
		}
		got = again
	}
	return got
}

// serverStartLog returns the server's log once it has started. Comparing,
// it waits until the log holds every line of want (in any order: parts
// start concurrently) and returns the log's lines in want's order
// followed by any others; updating, it waits until the log has been quiet
// for a second.
func (w *walker) serverStartLog(want []string) []string {
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := w.shown(w.serverLog.String())
		if *update {
			time.Sleep(time.Second)
			if again := w.shown(w.serverLog.String()); slices.Equal(again, got) || time.Now().After(deadline) {
				return again
			}
			continue
		}
		if ordered, ok := inOrderOf(want, got); ok || time.Now().After(deadline) {
			return ordered
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inOrderOf orders the lines of got like those of want they match
// (normalised), followed by the lines of got that match none, and reports
// whether every line of want was matched.
func inOrderOf(want, got []string) ([]string, bool) {
	ng := normalize(got)
	used := make([]bool, len(got))
	var out []string
	all := true
	for _, n := range normalize(want) {
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
