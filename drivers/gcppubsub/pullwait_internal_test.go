package gcppubsub

import (
	"testing"
	"time"
)

// TestPullDeadlineGrows: a Pull cut off by its deadline doubles the next
// one's, up to maxPullWait; one that brings messages sets it back to
// WaitTime; an empty answer before the deadline leaves it. (A cut-off
// Pull's messages stay leased until their ack deadline: a Pull whose
// answer takes longer than WaitTime to arrive, as a 10 MB message under
// load did in CI's conformance run, must get the time on a later try.)
func TestPullDeadlineGrows(t *testing.T) {
	const wait = time.Second
	cur := wait // the first Pull's
	var got []time.Duration
	for range 7 {
		cur = nextPullWait(cur, wait, true, false)
		got = append(got, cur)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("deadlines after cut-off Pulls %v, want %v", got, want)
		}
	}
	if d := nextPullWait(cur, wait, false, false); d != 30*time.Second {
		t.Fatalf("an empty answer changed the deadline to %v", d)
	}
	if d := nextPullWait(cur, wait, false, true); d != time.Second {
		t.Fatalf("after a Pull that brought messages the deadline is %v, want WaitTime (1s)", d)
	}
}
