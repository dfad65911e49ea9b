package cli_test

import (
	"context"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/internal/servicetest"
)

// TestVersion: wary version prints the module version of the build, and
// its VCS revision for a build from a work tree.
func TestVersion(t *testing.T) {
	r := newWary(t).want(cli.ExitOK, "version")
	if !strings.HasPrefix(r.out, "github.com/wary-go/wary") {
		t.Errorf("wary version: %q, want the module path first", r.out)
	}
	var v struct{ Module, Version, Go string }
	newWary(t).want(cli.ExitOK, "version", "--json").json(t, &v)
	if v.Version == "" || v.Go == "" {
		t.Errorf("wary version --json: %+v, want a version and a Go version", v)
	}

	for _, c := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.24.1", Main: debug.Module{Path: "github.com/wary-go/wary/cmd/wary", Version: "v0.3.0"}},
			`{"module":"github.com/wary-go/wary/cmd/wary","version":"v0.3.0","go":"go1.24.1"}`},
		{&debug.BuildInfo{GoVersion: "go1.24.1", Main: debug.Module{Path: "github.com/wary-go/wary/cmd/wary", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "c6dc463"}, {Key: "vcs.modified", Value: "true"}}},
			`{"module":"github.com/wary-go/wary/cmd/wary","version":"(devel)","revision":"c6dc463","modified":true,"go":"go1.24.1"}`},
	} {
		got, err := json.Marshal(cli.VersionOf(c.bi))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("version of %+v:\n got %s\nwant %s", c.bi.Main, got, c.want)
		}
	}
	if got, _ := json.Marshal(cli.VersionOf(nil)); !strings.Contains(string(got), `"version":"unknown"`) {
		t.Errorf("version without build information: %s", got)
	}
}

// TestWrongSchemaNamed: a --schema (or --prefix) where no store is gives
// an error that names the schema and the table looked for and says how
// to fix it, not a bare SQLSTATE 42P01.
func TestWrongSchemaNamed(t *testing.T) {
	url := servicetest.URL(t, cli.EnvPostgres, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, url string) error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	empty := strings.ReplaceAll(unique("wary_cli_empty"), "-", "_")
	if _, err := pool.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{empty}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{empty}.Sanitize()+" CASCADE")
	})
	_, good := pgStore(t)
	w := newWary(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"parked", "list", "--postgres", url, "--schema", empty},
			[]string{`schema "` + empty + `"`, `"wary_"`, `"` + empty + `"."wary_migrations" does not exist`, "--schema"}},
		{[]string{"outbox", "status", "--postgres", url, "--schema", "no_such_schema_" + empty},
			[]string{`schema "no_such_schema_` + empty + `"`, "does not exist", "--prefix"}},
		{append(append([]string{"parked", "list"}, good...), "--prefix", "other_"),
			[]string{`"other_"`, `"other_migrations" does not exist`}},
	} {
		r := w.want(cli.ExitError, c.args...)
		for _, s := range c.want {
			if !strings.Contains(r.errout, s) {
				t.Errorf("wary %s: stderr lacks %q:\n%s", strings.Join(c.args, " "), s, r.errout)
			}
		}
		if strings.Contains(r.errout, "SQLSTATE") {
			t.Errorf("wary %s: stderr is the raw database error:\n%s", strings.Join(c.args, " "), r.errout)
		}
	}
	w.want(cli.ExitOK, append([]string{"parked", "list"}, good...)...)
}
