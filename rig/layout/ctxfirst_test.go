package layout_test

import (
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

// ctxPackages are the packages whose constructors a program calls to reach
// a broker.
var ctxPackages = map[string]string{
	"broker":     "broker",
	"driver":     "broker/driver",
	"topology":   "broker/topology",
	"memory":     "drivers/memory",
	"rabbit":     "drivers/rabbit",
	"kafka":      "drivers/kafka",
	"sqsfifo":    "drivers/sqsfifo",
	"servicebus": "drivers/servicebus",
	"nats":       "drivers/nats",
	"gcppubsub":  "drivers/gcppubsub",
}

// constructorName is what a constructor is called: a function or method
// of one of ctxPackages with this prefix that returns something.
var constructorName = regexp.MustCompile(`^(Open|New|Dial|Declare|Create)`)

// noIO are the constructors that take no context, each with why it needs
// none: it does no I/O.
var noIO = map[string]string{
	"broker.NewTopic":                  "wraps a driver's topic, already open",
	"broker.NewSubscription":           "wraps a driver's subscription, already open",
	"broker.NewID":                     "returns a random ID",
	"broker.NewMessage":                "encodes a value into a message",
	"broker.NewDetachedDelivery":       "a delivery outside any broker (a replay, a test)",
	"topology.NewPlan":                 "a plan of entities; its Apply takes the context",
	"driver.NewURLParams":              "reads a URL's query",
	"driver.OpenError":                 "classifies an error of an open",
	"driver.NewPoller":                 "polls nothing until its Receive, which takes the context",
	"memory.New":                       "the broker is in the process",
	"memory.NewFakeClock":              "a clock for tests",
	"memory.Broker.CreateTopic":        "the broker is in the process",
	"memory.Broker.CreateSubscription": "the broker is in the process",
	"memory.Broker.OpenTopic":          "the broker is in the process",
	"memory.Broker.OpenSubscription":   "the broker is in the process",
	"memory.Broker.OpenDeadLetters":    "the broker is in the process",
}

// TestConstructorsTakeContext checks that every exported constructor of
// the broker and driver packages that may do I/O takes the caller's
// context.Context first, and that none of them, nor any function of its
// package it calls, bounds that I/O on its own: no context.Background or
// context.TODO except as the root of a lifetime of its own
// (context.WithCancel), and no context.WithTimeout or WithDeadline with a
// constant duration. The caller's context decides how long an open may
// take.
func TestConstructorsTakeContext(t *testing.T) {
	dir := repo(t)
	seen := map[string]bool{}
	for name, rel := range ctxPackages {
		p := parseCtxPackage(t, name, filepath.Join(dir, rel))
		for _, key := range p.keys {
			fn := p.funcs[key]
			if !isConstructor(fn) {
				continue
			}
			if why, ok := noIO[key]; ok {
				seen[key] = true
				if takesContext(fn) {
					t.Errorf("%s takes a context: drop it from noIO (%q)", key, why)
				}
				continue
			}
			if !takesContext(fn) {
				t.Errorf("%s (%s) does not take a context.Context first", key, p.fset.Position(fn.Pos()))
				continue
			}
			for _, bad := range p.selfBounded(key) {
				t.Errorf("%s: %s", key, bad)
			}
		}
	}
	for key := range noIO {
		if !seen[key] {
			t.Errorf("noIO names %s, which is not an exported constructor", key)
		}
	}
}

type ctxPackage struct {
	name   string
	fset   *token.FileSet
	funcs  map[string]*ast.FuncDecl // "pkg.Func", "pkg.Type.Method"
	keys   []string                 // of funcs, sorted
	consts map[string]bool          // package-level constants
}

func parseCtxPackage(t *testing.T, name, dir string) *ctxPackage {
	t.Helper()
	p := &ctxPackage{name: name, fset: token.NewFileSet(), funcs: map[string]*ast.FuncDecl{}, consts: map[string]bool{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				p.funcs[p.key(d)] = d
			case *ast.GenDecl:
				if d.Tok == token.CONST {
					for _, s := range d.Specs {
						for _, id := range s.(*ast.ValueSpec).Names {
							p.consts[id.Name] = true
						}
					}
				}
			}
		}
	}
	for k := range p.funcs {
		p.keys = append(p.keys, k)
	}
	slices.Sort(p.keys)
	return p
}

// key is "pkg.Func" or "pkg.Type.Method".
func (p *ctxPackage) key(fn *ast.FuncDecl) string {
	if fn.Recv == nil {
		return p.name + "." + fn.Name.Name
	}
	return p.name + "." + recvType(fn) + "." + fn.Name.Name
}

func recvType(fn *ast.FuncDecl) string {
	x := fn.Recv.List[0].Type
	for {
		switch y := x.(type) {
		case *ast.StarExpr:
			x = y.X
		case *ast.IndexExpr:
			x = y.X
		case *ast.IndexListExpr:
			x = y.X
		case *ast.Ident:
			return y.Name
		default:
			return "?"
		}
	}
}

// isConstructor: exported, of an exported type if a method, named like a
// constructor, and returning something.
func isConstructor(fn *ast.FuncDecl) bool {
	if !fn.Name.IsExported() || (fn.Recv != nil && !ast.IsExported(recvType(fn))) {
		return false
	}
	return constructorName.MatchString(fn.Name.Name) && fn.Type.Results != nil
}

func takesContext(fn *ast.FuncDecl) bool {
	ps := fn.Type.Params.List
	return len(ps) > 0 && isSel(ps[0].Type, "context", "Context")
}

func isSel(x ast.Expr, pkg, name string) bool {
	s, ok := x.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == pkg && s.Sel.Name == name
}

// selfBounded returns where the constructor named key, or a function of
// its package it calls (directly, or through its receiver), starts from a
// context of its own or sets a constant timeout.
func (p *ctxPackage) selfBounded(key string) []string {
	var bad []string
	done := map[string]bool{}
	var visit func(key string)
	visit = func(key string) {
		if done[key] {
			return
		}
		done[key] = true
		fn := p.funcs[key]
		if fn == nil || fn.Body == nil {
			return
		}
		recv := ""
		if fn.Recv != nil && len(fn.Recv.List[0].Names) > 0 {
			recv = fn.Recv.List[0].Names[0].Name
		}
		var stack []ast.Node
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			at := p.fset.Position(call.Pos())
			where := filepath.Base(at.Filename) + ":" + strconv.Itoa(at.Line)
			switch {
			case isSel(call.Fun, "context", "Background") || isSel(call.Fun, "context", "TODO"):
				if !rootOfLifetime(stack) {
					bad = append(bad, where+": context."+call.Fun.(*ast.SelectorExpr).Sel.Name+"() instead of the caller's context")
				}
			case isSel(call.Fun, "context", "WithTimeout") || isSel(call.Fun, "context", "WithDeadline"):
				if len(call.Args) == 2 && p.constant(call.Args[1]) {
					bad = append(bad, where+": a fixed "+call.Fun.(*ast.SelectorExpr).Sel.Name)
				}
			}
			switch f := call.Fun.(type) {
			case *ast.Ident:
				visit(p.name + "." + f.Name)
			case *ast.SelectorExpr:
				if id, ok := f.X.(*ast.Ident); ok && recv != "" && id.Name == recv {
					visit(p.name + "." + recvType(fn) + "." + f.Sel.Name)
				}
			}
			return true
		})
	}
	visit(key)
	return bad
}

// rootOfLifetime: the call (last on stack) is the parent of
// context.WithCancel, the lifetime of something that outlives the open
// (a subscription's background work), ended by its Close; or the context
// of a Close that undoes a failed open, which must run even when the
// caller's context has ended.
func rootOfLifetime(stack []ast.Node) bool {
	if len(stack) < 2 {
		return false
	}
	parent, ok := stack[len(stack)-2].(*ast.CallExpr)
	if !ok {
		return false
	}
	if s, ok := parent.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Close" {
		return true
	}
	return isSel(parent.Fun, "context", "WithCancel")
}

// constant: built of literals, constants of the package and time's units.
func (p *ctxPackage) constant(x ast.Expr) bool {
	ok := true
	ast.Inspect(x, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, isID := n.X.(*ast.Ident); !isID || id.Name != "time" {
				ok = false
			}
			return false
		case *ast.Ident:
			if !p.consts[n.Name] {
				ok = false
			}
		case nil, *ast.BasicLit, *ast.BinaryExpr, *ast.ParenExpr:
		default:
			ok = false
		}
		return ok
	})
	return ok
}
