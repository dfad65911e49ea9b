//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/nodeproc"
)

// TestREADMELocalBrokers follows the "Run it locally" sections of the
// broker guides the README links to (docs/brokers/sqs-fifo.md and
// servicebus.md) as a user on a fresh clone would: for each emulator, it
// runs the guide's command from the repository's root, waits for "ready",
// takes the export line and the queue URL it printed, and runs the
// guide's example command with the printed URL in place of the guide's
// sample one (the port differs each run) and the exported variables set,
// as pasting the export line would. The example must
// report OK; then the emulator is stopped with SIGINT and must leave no
// process behind.
func TestREADMELocalBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the emulators and the example with go run")
	}
	var steps []localStep
	for _, guide := range localGuides {
		doc, err := os.ReadFile("../../" + guide)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, localSteps(t, guide, string(doc))...)
	}
	if len(steps) < 2 {
		t.Fatalf("the guides' local sections show %d emulator(s) with an example command, want fauxqs and the Service Bus emulator", len(steps))
	}
	if _, err := exec.LookPath("npm"); err != nil {
		nodeproc.Unavailable(t, "the emulators' first run needs npm: not found on PATH")
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) { s.run(t) })
	}
}

// localGuides are the broker guides whose "Run it locally" section starts
// an emulator.
var localGuides = []string{"docs/brokers/sqs-fifo.md", "docs/brokers/servicebus.md"}

// localStep is one emulator of a guide's local section: its command,
// the queue URL of its sample output, and the example's command on it.
type localStep struct {
	name      string
	emulator  string // go -C drivers/... run ...
	sampleURL string // the "queue URL" line of the sample output
	example   string // go -C examples run -tags <driver> ./orders -broker <sampleURL>, then perhaps wary explain ...
}

// localSteps reads the section's fenced blocks in order: an sh block
// whose command runs an emulator, the sample output that follows it,
// and the next sh block that runs the example.
func localSteps(t *testing.T, guide, doc string) []localStep {
	t.Helper()
	_, sec, ok := strings.Cut(doc, "\n## Run it locally\n")
	if !ok {
		t.Fatalf(`%s lacks "## Run it locally"`, guide)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var steps []localStep
	var cur *localStep
	for rest := sec; ; {
		_, after, ok := strings.Cut(rest, "\n```")
		if !ok {
			break
		}
		lang, after, _ := strings.Cut(after, "\n")
		body, after, _ := strings.Cut(after, "\n```")
		rest = after
		body = strings.TrimSpace(body)
		switch {
		case lang == "sh" && strings.HasPrefix(body, "go -C drivers/"):
			steps = append(steps, localStep{name: path.Base(strings.Fields(body)[2]), emulator: body})
			cur = &steps[len(steps)-1]
		case lang == "" && cur != nil && cur.sampleURL == "":
			for _, l := range strings.Split(body, "\n") {
				if u, ok := strings.CutPrefix(l, "queue "); ok {
					cur.sampleURL = strings.Fields(u)[0]
					break
				}
			}
		case lang == "sh" && cur != nil && strings.HasPrefix(body, "go -C examples run ") && strings.Contains(body, " ./orders "):
			cur.example = body
			cur = nil
		}
	}
	for _, s := range steps {
		if s.sampleURL == "" || s.example == "" || !strings.Contains(s.example, s.sampleURL) {
			t.Fatalf("%s, %s: the example command %q does not run on the sample's queue URL %q", guide, s.name, s.example, s.sampleURL)
		}
	}
	return steps
}

func (s localStep) run(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	args := strings.Fields(s.emulator)
	if args[0] != "go" || strings.ContainsAny(s.emulator, `'"$\`) {
		t.Fatalf("the guide's command %q is not a plain go command", s.emulator)
	}
	emu := nodeproc.RunCommand(t, "../..", goBin, args[1:]...)
	out := emu.WaitLine("ready", 5*time.Minute)
	var env []string
	url := ""
	for _, l := range out {
		if e, ok := strings.CutPrefix(l, "export "); ok {
			env = exportPairs(t, e)
		}
		if u, ok := strings.CutPrefix(l, "queue "); ok && url == "" {
			url = strings.Fields(u)[0]
		}
	}
	if env == nil || url == "" {
		t.Fatalf("%s printed no export line or queue URL:\n%s", s.name, strings.Join(out, "\n"))
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	waryBin := ""
	for _, line := range strings.Split(s.example, "\n") {
		line = strings.ReplaceAll(line, s.sampleURL, url)
		// wary is what "go -C cmd/wary install ." installs; build it from
		// the clone instead, and run it where the guide does (the
		// repository's root, where its --config path is).
		wary := strings.HasPrefix(line, "wary ")
		if wary {
			if waryBin == "" {
				waryBin = filepath.Join(t.TempDir(), "wary")
				if out, err := exec.CommandContext(ctx, goBin, "-C", "../../cmd/wary", "build", "-o", waryBin, ".").CombinedOutput(); err != nil {
					t.Fatalf("build wary: %v\n%s", err, out)
				}
			}
			line = waryBin + " " + strings.TrimPrefix(line, "wary ")
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), env...)
		cmd.Env = append(cmd.Env, "AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull)
		got, err := cmd.CombinedOutput()
		switch {
		case wary:
			// explain states the example's pipeline on the entity's
			// settings read from the broker (what no attribute holds,
			// such as SQS's dedup window on an emulator, it states as
			// unknown) and finds nothing to fix.
			if err != nil || !strings.Contains(string(got), "subscription read from ") || !strings.Contains(string(got), "no misconfiguration found") {
				t.Fatalf("%s (%v): want the entity's settings read from the broker, and no misconfiguration:\n%s", line, err, nodeproc.LastLines(string(got), 40))
			}
		case err != nil || !strings.Contains(string(got), "result: OK"):
			t.Fatalf("%s (%v):\n%s", line, err, nodeproc.LastLines(string(got), 40))
		}
		t.Logf("%s: %s", s.name, firstOf(string(got), "result: ", "transport:"))
	}

	_, _ = emu.Interrupt(time.Minute) // go run exits 1 when its group is interrupted, whatever its child returns
	if !emu.GroupGone() {
		t.Errorf("a process of %s is still running after it exited", s.name)
	}
}

// exportPairs splits an export line's KEY=VALUE pairs, a value possibly
// in single quotes, as a shell would.
func exportPairs(t *testing.T, line string) []string {
	var pairs []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " '") {
			t.Fatalf("export line: cannot read %q", line)
		}
		if strings.HasPrefix(v, "'") {
			val, rest, ok := strings.Cut(v[1:], "'")
			if !ok {
				t.Fatalf("export line: unterminated quote after %s=", k)
			}
			pairs, line = append(pairs, k+"="+val), rest
			continue
		}
		val, rest, _ := strings.Cut(v, " ")
		pairs, line = append(pairs, k+"="+val), rest
	}
	return pairs
}

// firstOf returns the first line of s that starts with one of prefixes.
func firstOf(s string, prefixes ...string) string {
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				return l
			}
		}
	}
	return ""
}
