package layout_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// tag is the version the committed tree is served as.
const tag = "v0.1.0"

// serve writes every wary module of the commit HEAD into a file module
// proxy at dir, as a tag would publish them: each module's zip from git,
// its go.mod requiring its siblings at tag, without replacements.
func serve(t *testing.T, repo, dir string) {
	t.Helper()
	for _, m := range modules(t, repo) {
		sub := filepath.ToSlash(m)
		if sub == "." {
			sub = ""
		}
		data, err := exec.Command("git", "-C", repo, "show", "HEAD:"+filepath.ToSlash(filepath.Join(sub, "go.mod"))).Output()
		if err != nil {
			continue // a module not committed yet is not served
		}
		mf, err := modfile.Parse("go.mod", data, nil)
		if err != nil {
			t.Fatal(err)
		}
		path := mf.Module.Mod.Path
		for _, r := range mf.Require {
			if strings.HasPrefix(r.Mod.Path, root) {
				if err := mf.AddRequire(r.Mod.Path, tag); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, r := range mf.Replace {
			if err := mf.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				t.Fatal(err)
			}
		}
		mf.Cleanup()
		modData, err := mf.Format()
		if err != nil {
			t.Fatal(err)
		}
		esc, err := module.EscapePath(path)
		if err != nil {
			t.Fatal(err)
		}
		v := filepath.Join(dir, esc, "@v")
		if err := os.MkdirAll(v, 0o755); err != nil {
			t.Fatal(err)
		}
		write := func(name string, b []byte) {
			if err := os.WriteFile(filepath.Join(v, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("list", []byte(tag+"\n"))
		write(tag+".info", []byte(`{"Version":"`+tag+`","Time":"2026-12-01T00:00:00Z"}`))
		write(tag+".mod", modData)
		f, err := os.Create(filepath.Join(v, tag+".zip"))
		if err != nil {
			t.Fatal(err)
		}
		if err := zip.CreateFromVCS(f, module.Version{Path: path, Version: tag}, repo, "HEAD", sub); err != nil {
			t.Fatalf("zip %s: %v", path, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// user writes a program importing pkgs, with go.mod requiring reqs, and
// returns its folder.
func user(t *testing.T, dir string, reqs []string, pkgs ...string) string {
	t.Helper()
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range pkgs {
		src.WriteString("\t_ \"" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	mod := "module example.com/user\n\ngo 1.26.8\n\nrequire (\n\t" + root + " " + tag + "\n\t" + strings.Join(reqs, "\n\t") + "\n)\n"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUserTidyWeight: the README's install command (go get) works in a
// module of the user's own; what a user of RabbitMQ and PostgreSQL
// downloads when they add wary, from a fresh module cache, and that their
// own AWS and Azure versions stay theirs (the heavy drivers are modules of
// their own, so wary's go.mod does not raise them).
func TestUserTidyWeight(t *testing.T) {
	dir := repo(t)
	proxy := proxyReachable(t, dir)
	work := t.TempDir()
	serve(t, dir, filepath.Join(work, "proxy"))
	cache := filepath.Join(work, "modcache")
	env := []string{
		"GOMODCACHE=" + cache,
		"GOPROXY=file://" + filepath.ToSlash(filepath.Join(work, "proxy")) + "," + proxy,
		"GONOSUMDB=" + root,
		"GOFLAGS=-mod=mod",
	}
	t.Cleanup(func() { _ = exec.Command("chmod", "-R", "u+w", cache).Run() })

	// The README's install command, in a module of the user's own.
	install := filepath.Join(work, "install")
	if err := os.MkdirAll(install, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(install, "go.mod"), []byte("module example.com/install\n\ngo 1.26.8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A module cache of its own, so that the counts below start empty.
	installEnv := append([]string{"GOMODCACHE=" + filepath.Join(work, "installcache")}, env[1:]...)
	t.Cleanup(func() { _ = exec.Command("chmod", "-R", "u+w", filepath.Join(work, "installcache")).Run() })
	goCmd(t, install, installEnv, "get", root) // README: go get github.com/wary-go/wary
	if got := strings.TrimSpace(string(goCmd(t, install, installEnv, "list", "-m", root))); got != root+" "+tag {
		t.Errorf("after go get %s, go list -m says %q, want %q", root, got, root+" "+tag)
	}

	prog := user(t, filepath.Join(work, "user"), nil, userImports...)
	goCmd(t, prog, env, "build", "-o", os.DevNull, ".")
	built := zips(t, cache)
	goCmd(t, prog, env, "mod", "tidy")
	tidied := zips(t, cache)
	mib := size(t, cache) >> 20
	t.Logf("go build: %d module zips; go mod tidy: %d module zips, module cache %d MiB", len(built), len(tidied), mib)
	t.Logf("zips: %s", strings.Join(tidied, " "))
	// 23 today: pgx and its helpers, amqp091-go, OpenTelemetry's API,
	// goleak and rapid (the packages' tests), and jackc/pglogrepl with
	// jackc/pgio, which idem/postgres's streaming relay reads the WAL with.
	if len(tidied) > 24 {
		t.Errorf("go mod tidy downloaded %d module zips, want at most 24", len(tidied))
	}
	if mib > 150 {
		t.Errorf("the module cache holds %d MiB after go mod tidy, want at most 150", mib)
	}

	// A user already on older AWS and Azure SDKs.
	raise := user(t, filepath.Join(work, "raise"),
		[]string{"github.com/aws/aws-sdk-go-v2 v1.30.0", "github.com/Azure/azure-sdk-for-go/sdk/azcore v1.11.0"},
		root+"/broker", root+"/drivers/rabbit", root+"/idem/postgres",
		"github.com/aws/aws-sdk-go-v2/aws", "github.com/Azure/azure-sdk-for-go/sdk/azcore")
	goCmd(t, raise, env, "mod", "tidy")
	got := strings.Fields(string(goCmd(t, raise, env, "list", "-m", "github.com/aws/aws-sdk-go-v2", "github.com/Azure/azure-sdk-for-go/sdk/azcore")))
	want := []string{"github.com/aws/aws-sdk-go-v2", "v1.30.0", "github.com/Azure/azure-sdk-for-go/sdk/azcore", "v1.11.0"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after adding wary the user's SDKs are %v, want them kept at %v", got, want)
	}
}

// userImports are the packages of the program TestUserTidyWeight builds
// and tidies: a user of RabbitMQ and PostgreSQL.
var userImports = []string{root + "/broker", root + "/drivers/rabbit", root + "/idem", root + "/idem/postgres"}

// TestUserTestsLoadNoSQLite: go mod tidy loads the tests of every package
// a program builds, so none of the wary packages userImports builds has a
// test that imports SQLite (modernc.org), which would add its modules
// (about 44 MB of zips) to what that user downloads. The flows that run
// on the SQLite store are tested and shown in idem/sqlite. It checks
// offline what TestUserTidyWeight measures through a module proxy.
func TestUserTestsLoadNoSQLite(t *testing.T) {
	dir := repo(t)
	var wary []string
	for p := range strings.FieldsSeq(string(goCmd(t, dir, nil, append([]string{"list", "-deps"}, userImports...)...))) {
		if strings.HasPrefix(p, root+"/") {
			wary = append(wary, p)
		}
	}
	if len(wary) < len(userImports) {
		t.Fatalf("go list -deps found %d wary packages: the listing is broken", len(wary))
	}
	for _, p := range wary {
		for d := range strings.FieldsSeq(string(goCmd(t, dir, nil, "list", "-deps", "-test", p))) {
			if strings.HasPrefix(d, "modernc.org/") {
				t.Errorf("the tests of %s load %s: a user of %s downloads SQLite when they tidy", p, d, strings.Join(userImports, ", "))
				break
			}
		}
	}
}

// zips lists the module zips in the module cache at cache.
func zips(t *testing.T, cache string) []string {
	t.Helper()
	dl := filepath.Join(cache, "cache", "download")
	var out []string
	err := filepath.WalkDir(dl, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".zip") {
			rel, _ := filepath.Rel(dl, p)
			out = append(out, strings.Replace(strings.TrimSuffix(filepath.ToSlash(rel), ".zip"), "/@v/", "@", 1))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// size is the bytes of the files under dir.
func size(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
