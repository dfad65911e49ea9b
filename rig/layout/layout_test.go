package layout_test

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const root = "github.com/wary-go/wary"

// repo returns the repository's root folder, two floors above this
// package.
func repo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !bytes.HasPrefix(data, []byte("module "+root+"\n")) {
		t.Fatalf("%s is not the repository's root (go.mod: %v)", dir, err)
	}
	return dir
}

// modules returns the folders, relative to dir, that hold a go.mod.
func modules(t *testing.T, dir string) []string {
	t.Helper()
	var mods []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != dir {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			rel, _ := filepath.Rel(dir, filepath.Dir(p))
			mods = append(mods, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

// goCmd runs the go command in dir with env added to the environment.
func goCmd(t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return out
}

// floors orders the top-level folders: a package imports only folders on
// lower floors than its own (and its own folder). internal holds the
// ground helpers (OpenTelemetry glue, the service finders), nodeproc (a
// module of its own) the Node emulators' process plumbing, redact the hiding
// of secrets that broker and every driver module share; conformance is
// the suite over broker that the drivers' emulators and idem's store suite
// stand on; drivers and idem never import each other. testkit, the kit
// for users' handler tests, stands on drivers (memory) and idem (the inbox,
// the stores) beside cmd and examples: nothing below it imports it, and the
// examples' tests (test files aside here) may.
var floors = map[string]int{
	"internal":    0,
	"nodeproc":    0,
	"redact":      0,
	"broker":      1,
	"conformance": 2,
	"drivers":     3,
	"idem":        3,
	"cmd":         4,
	"examples":    4,
	"testkit":     4,
	"rig":         5,
	"bench":       5,
}

// TestLayersReadOneWay: across every module, no two top-level folders
// import each other through any of their packages (test files aside), and
// no package imports a folder on its own floor or above.
func TestLayersReadOneWay(t *testing.T) {
	dir := repo(t)
	edges := map[[2]string][]string{} // from, to folder -> "pkg -> import"
	for _, m := range modules(t, dir) {
		out := goCmd(t, filepath.Join(dir, m), nil, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			from := top(f[0])
			for _, imp := range f[1:] {
				if to := top(imp); to != "" && to != from {
					edges[[2]string{from, to}] = append(edges[[2]string{from, to}], f[0]+" -> "+imp)
				}
			}
		}
	}
	if len(edges) == 0 {
		t.Fatal("no imports between top-level folders found: the listing is broken")
	}
	for e, why := range edges {
		if back, ok := edges[[2]string{e[1], e[0]}]; ok && e[0] < e[1] {
			t.Errorf("%s/ and %s/ import each other: %s; %s", e[0], e[1], why[0], back[0])
		}
		fa, oka := floors[e[0]]
		fb, okb := floors[e[1]]
		switch {
		case !oka || !okb:
			t.Errorf("top-level folder without a floor in this test: %s/ imports %s/ (%s)", e[0], e[1], why[0])
		case fb >= fa:
			t.Errorf("%s/ (floor %d) imports %s/ (floor %d), which does not stand below it: %s", e[0], fa, e[1], fb, why[0])
		}
	}
}

// top returns the top-level folder of a wary import path, "" for others
// and for the root package.
func top(path string) string {
	rest, ok := strings.CutPrefix(path, root+"/")
	if !ok {
		return ""
	}
	first, _, _ := strings.Cut(rest, "/")
	return first
}

// TestCommandLinksNoTesting: the wary command probes a live broker through
// conformance.Probe's own reporter, not through package testing. (It still
// imports goleak, through the conformance package's Run; the binary links
// only goleak's init.)
func TestCommandLinksNoTesting(t *testing.T) {
	out := goCmd(t, filepath.Join(repo(t), "cmd", "wary"), nil, "list", "-deps", ".")
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed %d packages: the listing is broken", len(deps))
	}
	for _, bad := range []string{"testing", root + "/internal/servicetest"} {
		if slices.Contains(deps, bad) {
			t.Errorf("cmd/wary links %s", bad)
		}
	}
}

// proxyReachable skips t (fails it under WARY_REQUIRE_SERVICES=1) when git
// or the module proxy cannot be used, and returns GOPROXY.
func proxyReachable(t *testing.T, dir string) string {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (WARY_REQUIRE_SERVICES=1 fails instead)", args...)
	}
	if _, err := exec.LookPath("git"); err != nil {
		unavailable("git not found: %v", err)
	}
	if err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Run(); err != nil {
		unavailable("not a git checkout: %v", err)
	}
	proxy := strings.TrimSpace(string(goCmd(t, dir, nil, "env", "GOPROXY")))
	first, _, _ := strings.Cut(proxy, ",")
	if !strings.HasPrefix(first, "http") {
		unavailable("GOPROXY=%s: no module proxy to download from", proxy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(first, "/")+"/golang.org/x/mod/@v/list", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		unavailable("module proxy unreachable: %v", err)
	}
	resp.Body.Close()
	return proxy
}
