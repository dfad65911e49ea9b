package layout_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoRootInternalOutsideRoot checks that no package another module
// ships (its non-test files) imports the root module's internal packages:
// they promise nothing from one root release to the next, and minimal
// version selection may pair a driver module with a newer root than the
// one it was built against. A module that replaces the root with the
// checkout (the examples, rig, bench/peers) always builds against the
// root beside it, and ships nothing: it may.
func TestNoRootInternalOutsideRoot(t *testing.T) {
	dir := repo(t)
	for _, m := range modules(t, dir) {
		if m == "." || replacesRoot(t, filepath.Join(dir, m, "go.mod")) {
			continue
		}
		err := filepath.WalkDir(filepath.Join(dir, m), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				if strings.HasPrefix(path, root+"/internal/") {
					rel, _ := filepath.Rel(dir, p)
					t.Errorf("%s (module %s) imports %s, the root module's internal", rel, m, path)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// replacesRoot reports whether the go.mod at path replaces the root module
// with a directory (a path that starts with . or ..).
func replacesRoot(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "replace" && f[1] == root && f[2] == "=>" && strings.HasPrefix(f[3], ".") {
			return true
		}
	}
	return false
}
