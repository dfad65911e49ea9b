package layout_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
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

// exportedNames lists the exported top-level names of the package in dir
// (test files aside) and the exported methods of its exported types, as
// Type.Method.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
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
				if ix, ok := typ.(*ast.IndexExpr); ok {
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
