package layout_test

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 45's bounds on package broker, which keeps what a publisher or
// consumer writes: what drivers call is in broker/driver, the
// capabilities in broker/capability, entities in broker/topology,
// redaction in redact.
const (
	brokerMaxExported = 80
	brokerMaxDocLines = 500
)

// TestBrokerSurface: package broker exports at most brokerMaxExported
// identifiers (top-level names, and methods of exported types, in its
// non-test files), and `go doc -all` prints at most brokerMaxDocLines
// lines of it.
func TestBrokerSurface(t *testing.T) {
	dir := filepath.Join(repo(t), "broker")
	names := exportedNames(t, dir)
	if len(names) < 20 {
		t.Fatalf("%d exported names in broker: the count is broken", len(names))
	}
	if len(names) > brokerMaxExported {
		t.Errorf("broker exports %d identifiers, over %d: %s", len(names), brokerMaxExported, strings.Join(names, " "))
	}
	doc := goCmd(t, dir, nil, "doc", "-all", ".")
	lines := bytes.Count(doc, []byte("\n"))
	if lines < 100 {
		t.Fatalf("go doc -all printed %d lines: the listing is broken", lines)
	}
	if lines > brokerMaxDocLines {
		t.Errorf("go doc -all ./broker prints %d lines, over %d", lines, brokerMaxDocLines)
	}
	t.Logf("broker: %d exported identifiers, %d lines of go doc -all", len(names), lines)
}

// idemPackages are the packages issue 48 measures idem's surface by:
// those a user imports (the operator's idem/admin among them).
var idemPackages = []string{
	"idem", "idem/outbox", "idem/keys", "idem/guarantee", "idem/admin",
	"idem/postgres", "idem/sqlite",
}

// goneInside are the packages issue 48 moved inside (idem/internal/...):
// the store's interface, 142 exported identifiers at 7338be9 (63
// interface methods), and the store suites, 79. They must not come back.
var goneInside = []string{"idem/store", "idem/idemtest"}

// idemMaxSurface bounds the exported identifiers of broker and
// idemPackages together: 539 at 7338be9 (idem/store and idem/idemtest
// public, no idem/admin), 489 before issue 48's move, 301 after it (idem/admin's 25 among them).
const idemMaxSurface = 320

// TestIdemSurface counts the exported identifiers of broker and of
// idemPackages as TestBrokerSurface counts them (plus the methods of
// exported interfaces), logs each count and their sum, and fails above
// idemMaxSurface or if a package of goneInside exists again.
func TestIdemSurface(t *testing.T) {
	dir := repo(t)
	for _, p := range goneInside {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists (%v): the store seam and its suites are internal (idem/internal/...)", p, err)
		}
	}
	total := 0
	for _, p := range append([]string{"broker"}, idemPackages...) {
		pdir := filepath.Join(dir, filepath.FromSlash(p))
		names, methods := len(exportedNames(t, pdir)), len(interfaceMethods(t, pdir))
		if names == 0 {
			t.Fatalf("no exported names in %s: the count is broken", p)
		}
		t.Logf("%-15s %3d exported identifiers (%d names, %d interface methods)", p, names+methods, names, methods)
		total += names + methods
	}
	t.Logf("broker + idem: %d exported identifiers", total)
	if total > idemMaxSurface {
		t.Errorf("broker and idem's user packages export %d identifiers, over %d", total, idemMaxSurface)
	}
}

// exportedNames lists the exported top-level names of the package in dir
// (test files aside) and the exported methods of its exported types, as
// Type.Method.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, f := range parseDir(t, dir) {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names = append(names, d.Name.Name)
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				switch ix := typ.(type) {
				case *ast.IndexExpr: // T[P]
					typ = ix.X
				case *ast.IndexListExpr: // T[P, Q]
					typ = ix.X
				}
				if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
					names = append(names, id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	return names
}

// interfaceMethods lists the methods the exported interfaces of the
// package in dir (test files aside) declare, as Interface.Method; an
// embedded interface's are counted where it is declared.
func interfaceMethods(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, f := range parseDir(t, dir) {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				ts, ok := s.(*ast.TypeSpec)
				if !ok || !ts.Name.IsExported() {
					continue
				}
				it, ok := ts.Type.(*ast.InterfaceType)
				if !ok {
					continue
				}
				for _, m := range it.Methods.List {
					for _, n := range m.Names {
						if n.IsExported() {
							names = append(names, ts.Name.Name+"."+n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

// parseDir parses the Go files of dir, test files aside.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}
