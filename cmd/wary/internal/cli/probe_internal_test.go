package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wary-go/wary/conformance"
)

// TestSpinnerOnTerminalRepeatsNothing: on a terminal, where stdout and
// stderr show together, a scenario's progress leaves no line behind (the
// table shows the outcome); in a log, it leaves one line per scenario.
func TestSpinnerOnTerminalRepeatsNothing(t *testing.T) {
	for _, tty := range []bool{true, false} {
		var b bytes.Buffer
		s := &spinner{w: &b, tty: tty}
		s.Start("order-within-scope")
		s.Done(conformance.Result{Scenario: "order-within-scope", Outcome: conformance.Kept})
		lines := strings.Count(b.String(), "\n")
		if want := map[bool]int{true: 0, false: 1}[tty]; lines != want {
			t.Errorf("tty %t: %d lines left (%q), want %d", tty, lines, b.String(), want)
		}
	}
}
