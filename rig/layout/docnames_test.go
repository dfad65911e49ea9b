package layout_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// userPackages are the packages whose names a reader meets in the README,
// docs/ and doc comments as pkg.Name. Each is checked against the
// package's own source.
var userPackages = map[string]string{
	"broker":      "broker",
	"driver":      "broker/driver",
	"capability":  "broker/capability",
	"topology":    "broker/topology",
	"redact":      "redact",
	"memory":      "drivers/memory",
	"rabbit":      "drivers/rabbit",
	"kafka":       "drivers/kafka",
	"sqsfifo":     "drivers/sqsfifo",
	"sqsemu":      "drivers/sqsfifo/sqsemu",
	"servicebus":  "drivers/servicebus",
	"sbemu":       "drivers/servicebus/sbemu",
	"nats":        "drivers/nats",
	"gcppubsub":   "drivers/gcppubsub",
	"psemu":       "drivers/gcppubsub/psemu",
	"idem":        "idem",
	"outbox":      "idem/outbox",
	"keys":        "idem/keys",
	"guarantee":   "idem/guarantee",
	"postgres":    "idem/postgres",
	"sqlite":      "idem/sqlite",
	"testkit":     "testkit",
	"conformance": "conformance",
	"nodeproc":    "nodeproc",
}

// exported is what a package declares: its top-level names, and for each
// type the names of its methods and struct fields.
type exported struct {
	top     map[string]bool
	members map[string]map[string]bool
}

func readPackage(t *testing.T, dir string) exported {
	t.Helper()
	ex := exported{top: map[string]bool{}, members: map[string]map[string]bool{}}
	member := func(typ, name string) {
		if ex.members[typ] == nil {
			ex.members[typ] = map[string]bool{}
		}
		ex.members[typ][name] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					ex.top[d.Name.Name] = true
					continue
				}
				typ := d.Recv.List[0].Type
				for {
					switch x := typ.(type) {
					case *ast.StarExpr:
						typ = x.X
						continue
					case *ast.IndexExpr:
						typ = x.X
						continue
					case *ast.IndexListExpr:
						typ = x.X
						continue
					}
					break
				}
				if id, ok := typ.(*ast.Ident); ok {
					member(id.Name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							ex.top[n.Name] = true
						}
					case *ast.TypeSpec:
						ex.top[s.Name.Name] = true
						switch tt := s.Type.(type) {
						case *ast.StructType:
							for _, f := range tt.Fields.List {
								for _, n := range f.Names {
									member(s.Name.Name, n.Name)
								}
								if len(f.Names) == 0 { // embedded: its name, and promoted members are not followed
									e := f.Type
									if st, ok := e.(*ast.StarExpr); ok {
										e = st.X
									}
									switch x := e.(type) {
									case *ast.Ident:
										member(s.Name.Name, x.Name)
									case *ast.SelectorExpr:
										member(s.Name.Name, x.Sel.Name)
									}
								}
							}
						case *ast.InterfaceType:
							for _, m := range tt.Methods.List {
								for _, n := range m.Names {
									member(s.Name.Name, n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	return ex
}

// docRef matches pkg.Name and pkg.Name.Member.
var docRef = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)

// TestDocNamesResolve checks that every pkg.Name the README, docs/ and the
// packages' doc comments give, for a package of this repository, names
// something that package declares: a reader who types `go doc pkg.Name`
// finds it.
func TestDocNamesResolve(t *testing.T) {
	dir := repo(t)
	pkgs := map[string]exported{}
	for name, rel := range userPackages {
		pkgs[name] = readPackage(t, filepath.Join(dir, rel))
	}
	type place struct{ file, line string }
	var texts []place
	addMarkdown := func(p string) {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rel, _ := filepath.Rel(dir, p)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			n++
			texts = append(texts, place{rel + ":" + strconv.Itoa(n), sc.Text()})
		}
	}
	addMarkdown(filepath.Join(dir, "README.md"))
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != dir {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case strings.HasPrefix(rel, "docs"+string(filepath.Separator)) && strings.HasSuffix(p, ".md"):
			addMarkdown(p)
		case strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go"):
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, cg := range f.Comments {
				for _, c := range cg.List {
					texts = append(texts, place{rel + ":" + strconv.Itoa(fset.Position(c.Pos()).Line), c.Text})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, pl := range texts {
		for _, m := range docRef.FindAllStringSubmatch(pl.line, -1) {
			ex, ok := pkgs[m[1]]
			if !ok {
				continue
			}
			switch {
			case !ex.top[m[2]]:
				bad = append(bad, pl.file+": "+m[1]+"."+m[2])
			case m[3] != "" && ex.members[m[2]] != nil && !ex.members[m[2]][m[3]]:
				bad = append(bad, pl.file+": "+m[0])
			}
		}
	}
	slices.Sort(bad)
	for _, b := range bad {
		t.Errorf("names what its package does not declare: %s", b)
	}
}
