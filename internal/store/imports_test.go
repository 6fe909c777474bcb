package store

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports_StayBelowStore keeps the store tree at its layer: its
// non-test files import, of this module, only resource and the store
// packages themselves (never cache, apiserver, server or anything else
// above store).
func TestImports_StayBelowStore(t *testing.T) {
	const module = "github.com/meshnames/meshnames/"
	allowed := func(path string) bool {
		rel, ours := strings.CutPrefix(path, module)
		return !ours || rel == "internal/resource" || rel == "internal/store" || strings.HasPrefix(rel, "internal/store/")
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !allowed(p) {
				t.Errorf("%s imports %s: the store packages must not import above store", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
