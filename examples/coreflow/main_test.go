package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun: the program commits an order with its event, relays it, applies
// it once and drops the copy.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	const want = `relay published 1 <nil>
order-1/placed version 1 applied <nil>
order-1/placed version 1 duplicate <nil>
invoices 1
`
	if out.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", out.String(), want)
	}
}

// TestREADME: the README's core-flow program is this file, byte for byte.
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- core flow: kept in sync by examples/coreflow TestREADME -->\n```go\n"
	_, block, ok := strings.Cut(string(readme), marker)
	if !ok {
		t.Fatalf("README.md lacks %q", marker)
	}
	block, _, _ = strings.Cut(block, "```\n")
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if block != string(src) {
		t.Fatalf("README.md shows\n%s\nmain.go is\n%s", block, src)
	}
}

// readmeCommands are the commands of the README's sh blocks, each with
// what runs it; TestREADMECommands fails for a command not listed here.
var readmeCommands = map[string]string{
	"go get github.com/wary-go/wary": "rig/layout TestUserTidyWeight, through a module proxy serving the committed tree",
	"go -C examples run ./orders":    "TestREADMECommands",
	"make test":                      ".ci/run",
	"go -C cmd/wary install .":       "TestREADMECommands",
}

// TestREADMECommands: every command the README shows is run, here or
// where readmeCommands says.
func TestREADMECommands(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for rest := string(readme); ; {
		_, after, ok := strings.Cut(rest, "\n```sh\n")
		if !ok {
			break
		}
		block, after, _ := strings.Cut(after, "\n```")
		rest = after
		for _, l := range strings.Split(block, "\n") {
			l, _, _ = strings.Cut(l, "#")
			if l = strings.TrimSpace(l); l == "" {
				continue
			}
			if _, ok := readmeCommands[l]; !ok {
				t.Errorf("the README shows %q, which no test runs: run it in a test and list it in readmeCommands", l)
			}
			cmds = append(cmds, l)
		}
	}
	if len(cmds) != len(readmeCommands) {
		t.Errorf("the README shows %d commands %q, want the %d of readmeCommands", len(cmds), cmds, len(readmeCommands))
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\nmake test\n") {
		t.Error(".ci/run does not run make test")
	}
	if testing.Short() {
		t.Skip("runs the orders example and installs the wary command")
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), goBin, args...)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := run(nil, "-C", "examples", "run", "./orders"); !strings.Contains(out, "result: OK") {
		t.Errorf("go -C examples run ./orders did not report result: OK:\n%s", out)
	}
	bin := t.TempDir()
	run([]string{"GOBIN=" + bin}, "-C", "cmd/wary", "install", ".")
	out, err := exec.CommandContext(t.Context(), filepath.Join(bin, "wary"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "github.com/wary-go/wary/cmd/wary ") {
		t.Errorf("the installed wary version: %v\n%s", err, out)
	}
}
