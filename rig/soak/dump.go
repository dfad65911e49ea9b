package soak

import (
	"bytes"
	"os"
	"strings"
	"time"
)

// dumpStacks makes each live child worker print its goroutines' stacks
// (SIGQUIT: the Go runtime prints them to stderr and exits) and returns
// the goroutines that run wary's code, so that a stalled run's failure
// shows what its workers were waiting on, also where the run's directory
// is not kept (CI).
func (r *runner) dumpStacks() string {
	var live []*worker
	for _, w := range r.consumers {
		if w.cmd != nil && !w.exited() {
			live = append(live, w)
		}
	}
	for _, w := range live {
		w.markStopped()
		_ = w.cmd.Process.Signal(quitSignal)
	}
	var out strings.Builder
	for _, w := range live {
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			w.kill()
			<-w.done
		}
		b, err := os.ReadFile(w.stderrAt)
		if err != nil {
			continue
		}
		out.WriteString("\n--- stacks of " + w.spec.Name + " (" + w.stderrAt + ") ---\n")
		out.WriteString(wary(b, 400))
	}
	return out.String()
}

// wary keeps the goroutines of a stack dump that run wary's code, at most
// max lines.
func wary(dump []byte, max int) string {
	var out []string
	for g := range bytes.SplitSeq(dump, []byte("\n\n")) {
		if !bytes.Contains(g, []byte("github.com/wary-go/wary/")) || !bytes.HasPrefix(bytes.TrimSpace(g), []byte("goroutine ")) {
			continue
		}
		out = append(out, strings.Split(strings.TrimSpace(string(g)), "\n")...)
		out = append(out, "")
		if len(out) >= max {
			out = append(out[:max], "…")
			break
		}
	}
	return strings.Join(out, "\n")
}
