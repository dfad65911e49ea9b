package layout_test

import (
	"bytes"
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
// one it was built against.
func TestNoRootInternalOutsideRoot(t *testing.T) {
	dir := repo(t)
	for _, m := range modules(t, dir) {
		if m == "." {
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

// TestNodeprocCopiesAgree checks that the copies of internal/nodeproc
// that the emulators' modules hold are the root's, file for file and byte
// for byte (see the package doc of internal/nodeproc).
func TestNodeprocCopiesAgree(t *testing.T) {
	dir := repo(t)
	want := readDir(t, filepath.Join(dir, "internal", "nodeproc"))
	for _, c := range []string{"drivers/sqsfifo/internal/nodeproc", "drivers/servicebus/internal/nodeproc"} {
		got := readDir(t, filepath.Join(dir, c))
		for name, w := range want {
			if g, ok := got[name]; !ok {
				t.Errorf("%s: %s is missing: copy internal/nodeproc over it", c, name)
			} else if !bytes.Equal(g, w) {
				t.Errorf("%s: %s differs from internal/nodeproc's: copy internal/nodeproc over it", c, name)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s: %s is not in internal/nodeproc", c, name)
			}
		}
	}
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	if len(files) == 0 {
		t.Fatalf("%s holds no files", dir)
	}
	return files
}
