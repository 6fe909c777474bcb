// Package internal_test checks the dependency direction of STYLE.md:
// validate -> resource -> store -> {cache, apiserver, ...} -> server -> cli
// -> cmd, with hostname, decode and validate as leaves anyone may use.
package internal_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/meshnames/meshnames/"

// allowed lists, for each package (by path below the module, with /...
// for a subtree), the packages of this module it may import directly.
var allowed = map[string][]string{
	"internal/validate":          {},
	"internal/decode":            {"internal/validate"},
	"internal/hostname":          {"internal/validate"},
	"internal/resource":          {"internal/validate", "internal/decode", "internal/hostname"},
	"internal/config":            {"internal/validate", "internal/decode"},
	"internal/store":             {"internal/resource"},
	"internal/store/...":         {"internal/store", "internal/store/sqlstore", "internal/resource"},
	"internal/store/kube":        {"internal/store", "internal/store/sqlstore", "internal/resource", "internal/validate", "internal/decode", "internal/kubeapi", "internal/crd"},
	"internal/kubeapi":           {},
	"internal/kubeapi/kubetest":  {"internal/kubeapi", "internal/crd"},
	"internal/crd":               {"internal/resource", "internal/kubeapi"},
	"internal/cache":             {"internal/resource", "internal/store"},
	"internal/api":               {"internal/resource", "internal/validate"},
	"internal/admission":         {"internal/resource", "internal/store", "internal/cache", "internal/validate"},
	"internal/apiserver":         {"internal/admission", "internal/api", "internal/resource", "internal/store", "internal/cache", "internal/validate", "internal/hostname", "internal/meshservices"},
	"internal/meshservices":      {"internal/api", "internal/resource", "internal/store", "internal/cache", "internal/validate", "internal/reconcile"},
	"internal/client":            {"internal/api", "internal/resource", "internal/validate"},
	"internal/kuma":              {"internal/api", "internal/decode", "internal/resource", "internal/validate"},
	"internal/reconcile":         {"internal/resource", "internal/store", "internal/cache"},
	"internal/leader":            {"internal/store", "internal/store/postgres"},
	"internal/ipam":              {},
	"internal/vips":              {"internal/resource", "internal/store", "internal/ipam", "internal/reconcile"},
	"internal/dnsserver":         {"internal/resource", "internal/cache", "internal/reconcile"},
	"internal/extsvc":            {"internal/resource", "internal/store", "internal/reconcile"},
	"internal/hostnames":         {"internal/admission", "internal/resource", "internal/store", "internal/hostname", "internal/reconcile"},
	"internal/server":            {"internal/admission", "internal/reconcile", "internal/api", "internal/config", "internal/resource", "internal/store", "internal/store/sqlite", "internal/store/postgres", "internal/store/kube", "internal/kubeapi", "internal/kubeservices", "internal/cache", "internal/apiserver", "internal/kuma", "internal/hostnames", "internal/leader", "internal/vips", "internal/dnsserver", "internal/meshservices", "internal/extsvc"},
	"internal/kubeservices":      {"internal/admission", "internal/resource", "internal/store", "internal/cache", "internal/reconcile", "internal/validate", "internal/kubeapi"},
	"internal/server/servertest": {"internal/config", "internal/server"},
	"internal/cli":               {"internal/api", "internal/config", "internal/server", "internal/client", "internal/resource", "internal/validate", "internal/crd"},
	"cmd/meshnames":              {"internal/cli"},
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func rulesFor(path string) ([]string, bool) {
	if r, ok := allowed[path]; ok {
		return r, true
	}
	for p, r := range allowed {
		if prefix, ok := strings.CutSuffix(p, "/..."); ok && strings.HasPrefix(path, prefix+"/") {
			return r, true
		}
	}
	return nil, false
}

func TestLayering(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", module+"...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		path := strings.TrimPrefix(p.ImportPath, module)
		if path == "internal" || strings.HasPrefix(path, "test/") || path == "bench" || strings.HasSuffix(path, "/storetest") || strings.HasSuffix(path, "/reconciletest") {
			continue // tests and benchmarks may use anything
		}
		rules, ok := rulesFor(path)
		if !ok {
			t.Errorf("package %s has no layering rule; add it to allowed in internal/layering_test.go", path)
			continue
		}
		checked++
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			ok := false
			for _, a := range rules {
				if dep == a {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %s, which its layer may not (allowed: %v)", path, dep, rules)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked only %d packages; is go list working?", checked)
	}
}
