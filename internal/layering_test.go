// Package internal_test checks the rules of STYLE.md that the compiler does
// not: the layering of the module's packages (which may import which), that
// nothing made for tests reaches the binary, and that every package says in
// a doc comment what it is and what it imports.
//
// Adding a package is one line: put it in its layer, or in testOnly.
package internal_test

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/meshnames/meshnames/"

// layers, lowest first. The rule: a package imports, of this module, only
// packages of lower layers, never of its own layer or above, except for the
// named exceptions below. A layer's packages may use every layer beneath.
var layers = []struct {
	name string
	pkgs []string
}{
	{"vocabulary: field paths and violations; generated wire formats", []string{"internal/validate", "api/zonesync/v1"}},
	{"pure libraries anyone may use", []string{"internal/decode", "internal/hostname", "internal/ipam", "internal/kubeapi", "internal/s2dict"}},
	{"the model: kinds, documents, configuration", []string{"internal/resource", "internal/config"}},
	{"contracts: the store, the API's bodies", []string{"internal/store", "internal/api"}},
	{"what the store backends share", []string{"internal/store/backend"}},
	{"over the contracts: the SQL store, the cache, the API client, Kuma's wire shapes, tokens, the audit log and history", []string{
		"internal/store/sqlstore", "internal/cache", "internal/client", "internal/kuma", "internal/token", "internal/audit", "internal/history",
		"internal/crd",
	}},
	{"manifests of a whole installation", []string{"internal/install"}},
	{"store backends", []string{"internal/store/sqlite", "internal/store/postgres", "internal/store/kube", "internal/store/pebble"}},
	{"what the parts share: admission of writes, the controller runner, authentication, what proxies read of Kubernetes", []string{"internal/admission", "internal/reconcile", "internal/auth", "internal/kubexds"}},
	{"parts: election, controllers, DNS, REST, GUI", []string{
		"internal/leader", "internal/hostnames", "internal/vips", "internal/meshservices", "internal/extsvc", "internal/mzservice", "internal/kubeservices", "internal/kubemcs",
		"internal/dnsserver", "internal/apiserver", "internal/gui", "internal/zonesync", "internal/xds",
	}},
	{"wiring", []string{"internal/server"}},
	{"the command line", []string{"internal/cli"}},
	{"main", []string{"cmd/meshnames"}},
}

// private packages may be imported only by the packages listed (beside the
// layer rule): the SQL store by its backends, the backends by the wiring.
// Everything else reaches a backend through the store contract.
var private = map[string][]string{
	"internal/store/sqlstore": {"internal/store/sqlite", "internal/store/postgres"},
	"internal/store/backend":  {"internal/store/sqlstore", "internal/store/sqlite", "internal/store/pebble", "internal/store/kube"},
	"internal/store/sqlite":   {"internal/server"},
	"internal/store/postgres": {"internal/server"},
	"internal/store/kube":     {"internal/server"},
	"internal/store/pebble":   {"internal/server"},
}

// exceptions are imports that break the layer rule, each with why. An
// exception that is no longer used fails the test, so that it is removed.
var exceptions = map[[2]string]string{}

// testOnly are packages for tests and benchmarks: they may import anything,
// and the binary must not contain them. A path ending in /... is a tree.
var testOnly = []string{
	"internal", // this test
	"internal/server/servertest",
	"internal/store/storetest",
	"internal/store/postgres/pgtest",
	"internal/reconcile/reconciletest",
	"internal/kubeapi/kubetest",
	"internal/porttest",
	"test/...",
	"bench/...",
	"examples/...", // programs that show users how to use meshnames; tests run them
}

// notInBinary are packages of other modules that only tests use.
var notInBinary = []string{
	"testing", "testing/...", "net/http/httptest",
	"github.com/google/go-cmp/...", "golang.org/x/tools/...",
}

// in reports whether path is one of pats, where a pattern ending in /...
// also matches its subtree.
func in(path string, pats []string) bool {
	for _, p := range pats {
		if prefix, ok := strings.CutSuffix(p, "/..."); ok && (path == prefix || strings.HasPrefix(path, prefix+"/")) || path == p {
			return true
		}
	}
	return false
}

type pkg struct {
	ImportPath   string
	Dir          string
	Name         string
	Imports      []string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
}

func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-e", "-json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// layerOf returns the index of path's layer, or -1.
func layerOf(path string) int {
	for i, l := range layers {
		if slices.Contains(l.pkgs, path) {
			return i
		}
	}
	return -1
}

// TestLayering checks every package of the module against layers, private
// and exceptions, and that each is in a layer or in testOnly.
func TestLayering(t *testing.T) {
	used := map[[2]string]bool{}
	checked := 0
	for _, p := range goList(t, module+"...") {
		path := strings.TrimPrefix(p.ImportPath, module)
		if in(path, testOnly) {
			if layerOf(path) >= 0 {
				t.Errorf("%s is both in a layer and in testOnly", path)
			}
			continue
		}
		mine := layerOf(path)
		if mine < 0 {
			t.Errorf("package %s has no layer: add it to layers (or testOnly) in internal/layering_test.go", path)
			continue
		}
		checked++
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if in(dep, testOnly) {
				t.Errorf("%s imports %s, which is for tests only", path, dep)
				continue
			}
			if who, ok := private[dep]; ok && !slices.Contains(who, path) {
				t.Errorf("%s imports %s, which only %v may import", path, dep, who)
			}
			theirs := layerOf(dep)
			if theirs < 0 || theirs < mine {
				continue // a missing layer is reported for dep itself
			}
			if _, ok := exceptions[[2]string{path, dep}]; ok {
				used[[2]string{path, dep}] = true
				continue
			}
			t.Errorf("%s (layer %q) imports %s (layer %q): a package imports only lower layers", path, layers[mine].name, dep, layers[theirs].name)
		}
	}
	for e, why := range exceptions {
		if !used[e] {
			t.Errorf("exception %s -> %s (%s) is not used any more: remove it", e[0], e[1], why)
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d packages; is go list working?", checked)
	}
}

// TestBinary_NoTestCode checks the meshnames binary's dependencies: no
// testing package, no test helper of this module, no test-only library.
func TestBinary_NoTestCode(t *testing.T) {
	deps := goList(t, "-deps", module+"cmd/meshnames")
	if len(deps) < 50 {
		t.Fatalf("the binary has %d dependencies; is go list working?", len(deps))
	}
	for _, d := range deps {
		path, ours := strings.CutPrefix(d.ImportPath, module)
		switch {
		case ours && in(path, testOnly):
			t.Errorf("the binary contains %s, a package for tests", path)
		case !ours && in(d.ImportPath, notInBinary):
			t.Errorf("the binary contains %s, which only tests may use", d.ImportPath)
		}
	}
}

// TestPackages_HaveDocComments checks that every package of the module,
// test-only packages included, has a package doc comment in one of its
// files (STYLE.md: what it owns, what it must not import, its concurrency
// rules).
func TestPackages_HaveDocComments(t *testing.T) {
	for _, p := range goList(t, module+"...") {
		files := slices.Concat(p.GoFiles, p.TestGoFiles, p.XTestGoFiles)
		if len(files) == 0 {
			continue
		}
		documented := false
		for _, f := range files {
			ast, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if ast.Doc != nil && strings.TrimSpace(ast.Doc.Text()) != "" {
				documented = true
				break
			}
		}
		if !documented {
			t.Errorf("package %s has no doc comment", strings.TrimPrefix(p.ImportPath, module))
		}
	}
}

// importsClaim finds a package doc's sentence about its imports: "It
// imports resource, store and cache only; ..." gives "resource, store and
// cache only".
var importsClaim = regexp.MustCompile(`\b(?:[Ii]t|and|[Tt]his package) imports ([^.;:(]*)`)

// TestPackages_DocsNameTheirImports checks the sentence of each package's
// doc comment that says what it imports against what its files import of
// this module: every package named is imported, and every package imported
// is named (as a path under internal/, or api/...). A package whose doc
// makes no such claim fails, but those in noImportsClaim.
func TestPackages_DocsNameTheirImports(t *testing.T) {
	pkgs := goList(t, module+"...")
	short := map[string]bool{} // every package of the module, as docs name it
	for _, p := range pkgs {
		short[shortName(p.ImportPath)] = true
	}
	checked := 0
	for _, p := range pkgs {
		path := strings.TrimPrefix(p.ImportPath, module)
		doc := packageDoc(t, p)
		m := importsClaim.FindStringSubmatch(strings.Join(strings.Fields(doc), " "))
		if m == nil {
			if !slices.Contains(noImportsClaim, path) && !in(path, testOnly) {
				t.Errorf("the doc comment of %s does not say what it imports (\"It imports a, b and c.\")", path)
			}
			continue
		}
		checked++
		named := map[string]bool{}
		for _, w := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ' ' || r == ',' || r == '(' || r == ')' }) {
			if w = strings.TrimPrefix(w, "internal/"); short[w] {
				named[w] = true
			}
		}
		imported := map[string]bool{}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				imported[shortName(imp)] = true
			}
		}
		for n := range named {
			if !imported[n] {
				t.Errorf("the doc comment of %s says it imports %s, which it does not", path, n)
			}
		}
		for n := range imported {
			if !named[n] {
				t.Errorf("%s imports %s, which its doc comment does not name (%q)", path, n, m[0])
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d packages; is go list working?", checked)
	}
}

// noImportsClaim are the packages whose doc need not list their imports:
// the wiring and the command line import every part.
var noImportsClaim = []string{"internal/server", "internal/cli", "cmd/meshnames"}

// shortName is how package docs name a package of the module.
func shortName(importPath string) string {
	return strings.TrimPrefix(strings.TrimPrefix(importPath, module), "internal/")
}

// packageDoc returns the doc comment of p, from whichever file has one.
func packageDoc(t *testing.T, p pkg) string {
	t.Helper()
	for _, f := range slices.Concat(p.GoFiles, p.TestGoFiles, p.XTestGoFiles) {
		ast, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if ast.Doc != nil && strings.TrimSpace(ast.Doc.Text()) != "" {
			return ast.Doc.Text()
		}
	}
	return ""
}
