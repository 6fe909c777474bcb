package e2e

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the outputs of the documentation's transcripts from a real run")

// docPage is a page whose command transcripts TestDocs runs. A transcript
// is a fenced block whose first line starts with "$ ": each "$ " line is a
// command (continued by a trailing backslash), the lines up to the next
// one its output. A fenced block after a <!-- file: NAME --> line is
// written to NAME before the commands after it run. An output line "..."
// stands for any number of lines.
type docPage struct {
	path    string // from the repository's root
	section string // the heading whose section holds the transcripts; "" for the whole page
	serve   bool   // the page's commands expect `meshnames serve` running with the defaults
	kube    bool   // the page's commands expect a Kubernetes cluster (~/.kube/config)
	// normalize holds what else changes from run to run on this page
	// (beyond docNormalizers).
	normalize []normalizer
	// appPorts are ports of the page's own programs that its files and
	// commands name as plain numbers (an inbound's port): each is mapped
	// to a free port, and back in outputs.
	appPorts []int
}

// docPages are the pages with transcripts, in the order of docs/README.md.
var docPages = []docPage{
	{path: "README.md", section: "## Five minutes with meshnames", appPorts: []int{9000}},
	{path: "docs/resources.md", serve: true},
	{path: "docs/hostnames.md", serve: true},
	{path: "docs/dns.md", serve: true},
	{path: "docs/universal.md", serve: true},
	{path: "docs/external-services.md", serve: true},
	{path: "docs/security.md", serve: true, normalize: []normalizer{{regexp.MustCompile(`\b[0-9a-f]{16}\b`), "<token-id>"}}},
	{path: "docs/cli.md", serve: true, normalize: []normalizer{
		{regexp.MustCompile(`\d+ bytes, (\w+) store at revision \d+`), "<size>, $1 store at <revision>"},
		{regexp.MustCompile(`\S+/127\.0\.0\.1:(\d+)/\d+/[0-9a-f]+`), "<host>/127.0.0.1:$1/<pid>/<id>"}, // an instance: host, API, pid, start
	}},
	{path: "docs/configuration.md"},
	{path: "docs/multizone-services.md", serve: true},
	{path: "docs/multizone.md", normalize: []normalizer{
		// A stream's revisions and byte counts depend on when heartbeats and
		// inventories fell.
		{regexp.MustCompile(`(line +\S+ ago)( +\d+){3} +\d+/\d+ +\d+B/\d+B`), "$1 <counters>"},
	}},
	{path: "docs/kubernetes.md", kube: true, normalize: []normalizer{{regexp.MustCompile(`\b10\.96\.\d+\.\d+\b`), "<cluster-ip>"}}},
	{path: "docs/xds.md", serve: true, appPorts: []int{9001, 9002}, normalize: []normalizer{
		{regexp.MustCompile(`\b[0-9a-f]{16}\b`), "<version>"},         // content hashes hold the walk's ports
		{regexp.MustCompile(`instance: \S+`), "instance: <instance>"}, // host, address, pid, random
	}},
	{path: "docs/kuma.md", serve: true, normalize: []normalizer{{regexp.MustCompile(`"hostname":"[^"]*"`), `"hostname":"<host>"`}}},
}

type normalizer struct {
	re   *regexp.Regexp
	with string
}

// docNormalizers make outputs comparable from run to run: times, ages,
// durations, process ids and DNS message ids change; so does the alignment
// of tables whose columns hold them.
var docNormalizers = []normalizer{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`\d{8}T\d{6}(\.\d+)?Z`), "<time>"}, // in label values
	{regexp.MustCompile(`dur=\S+`), "dur=<dur>"},
	{regexp.MustCompile(`\(pid \d+\)`), "(pid <pid>)"},
	{regexp.MustCompile(`id: \d+`), "id: <id>"},
	{regexp.MustCompile(`token=[0-9a-f]{16}`), "token=<id>"},
	{regexp.MustCompile(`\b[Tt]oken [0-9a-f]{16}\b`), "token <id>"},
	{regexp.MustCompile(`\b\d+[smhd]\b`), "<age>"},
	{regexp.MustCompile(`[ \t]+`), " "},
}

func (p docPage) normalizeLines(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		for _, n := range p.normalize {
			l = n.re.ReplaceAllString(l, n.with)
		}
		for _, n := range docNormalizers {
			l = n.re.ReplaceAllString(l, n.with)
		}
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// elision is the output line that stands for any number of lines.
const elision = "..."

// matches reports whether got is want, normalised, where an elision line
// of want stands for any number of lines of got.
func (p docPage) matches(want, got []string) bool {
	return matchLines(p.normalizeLines(want), p.normalizeLines(got))
}

func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == elision {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && want[0] == got[0] && matchLines(want[1:], got[1:])
}

// docStep is one command of a transcript and the output the page shows.
type docStep struct {
	cmd   string   // the command as the shell gets it (continuations kept)
	lines []string // the page's lines of the command
	want  []string // the output lines the page shows
}

// docBlock is a fenced block: a transcript, or a file's content.
type docBlock struct {
	start, end int // the page's lines of the content, between the fences
	file       string
	content    []string
	steps      []docStep
}

const fileMarker = "<!-- file: "

// parseDoc finds the transcripts and files of a page's lines.
func parseDoc(t *testing.T, p docPage, lines []string) []*docBlock {
	t.Helper()
	begin := -1
	if p.section != "" {
		if begin = slices.Index(lines, p.section); begin < 0 {
			t.Fatalf("%s has no %q section", p.path, p.section)
		}
	}
	var blocks []*docBlock
	file := ""
	for i := begin + 1; i < len(lines); i++ {
		l := lines[i]
		if p.section != "" && strings.HasPrefix(l, "## ") {
			break
		}
		if name, ok := strings.CutPrefix(l, fileMarker); ok {
			file = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(name), "-->"))
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		b := &docBlock{start: i + 1, end: end, file: file, content: lines[i+1 : end]}
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
			s := docStep{lines: []string{b.content[j]}}
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
	if !slices.ContainsFunc(blocks, func(b *docBlock) bool { return len(b.steps) > 0 }) {
		t.Fatalf("found no transcript in %s; is its layout what this test expects?", p.path)
	}
	return blocks
}

// TestDocs runs the command transcripts of each page of docPages in a
// directory of its own, with the meshnames binary as ./meshnames and as
// meshnames on PATH, on free ports (the commands name the default ports,
// and their outputs show them), and compares their outputs with the
// page's, after normalising times, ages, durations, process and DNS ids
// (and the columns they align). A command that only reads is run again,
// for up to 15 s, until its output matches: the controllers name what a
// write created asynchronously. `meshnames serve` runs in the background,
// as in a terminal of its own, once it answers /readyz (its start log is
// compared in any order); one that exits is compared like any command.
//
// With -update it rewrites the outputs that differ from the run's (a
// read's output once it is the same twice in a row), leaving commands,
// prose and outputs that differ only in times, ages and ids alone: change
// a command or a file on the page, or the behaviour, run -update, and read
// the diff. A page is one line of docPages.
func TestDocs(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is not installed; the documentation's transcripts use it")
		}
		t.Skip("curl is not installed; the documentation's transcripts use it")
	}
	for _, p := range docPages {
		name := strings.TrimSuffix(filepath.Base(p.path), ".md")
		t.Run(name, func(t *testing.T) {
			t.Parallel() // no timing bound that other processes could break
			runDoc(t, p)
		})
	}
}

func runDoc(t *testing.T, p docPage) {
	path := filepath.Join("..", "..", p.path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	blocks := parseDoc(t, p, lines)
	w := newDocWalker(t, p, blocks)

	mismatches := 0
	for _, b := range blocks {
		if b.file != "" {
			w.writeFile(b.file, b.content)
			continue
		}
		for i := range b.steps {
			s := &b.steps[i]
			got := w.step(s)
			if *update {
				if !p.matches(s.want, got) {
					s.want = got
				}
				continue
			}
			if !p.matches(s.want, got) {
				mismatches++
				t.Errorf("$ %s\noutput differs from %s (-page +run, normalised); run with -update to rewrite:\n%s",
					s.cmd, p.path, cmp.Diff(p.normalizeLines(s.want), p.normalizeLines(got)))
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
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if mismatches > 0 {
		t.Logf("%d command(s) of %s differ; the outputs above are what a user gets", mismatches, p.path)
	}
}

// TestDocs_EveryTranscriptRuns holds docPages to the pages that have
// transcripts: a page of docs/ with a "$ " block that no line of docPages
// names would drift unseen.
func TestDocs_EveryTranscriptRuns(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, p := range docPages {
		listed[p.path] = true
	}
	for _, path := range pages {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		page := filepath.ToSlash(filepath.Join("docs", filepath.Base(path)))
		fenced := false
		for i, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "```") {
				fenced = !fenced
				continue
			}
			if fenced && strings.HasPrefix(l, "$ ") && !listed[page] {
				t.Errorf("%s:%d has a transcript, but docPages has no line for %s", page, i+1, page)
				break
			}
		}
	}
}
