package gcppubsub

import (
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// TestPullDeadlineGrows: a Pull cut off by its deadline doubles the next
// one's, up to maxPullWait; one that brings messages sets it back to
// WaitTime; an empty answer before the deadline leaves it. (A cut-off
// Pull's messages stay leased until their ack deadline: a Pull whose
// answer takes longer than WaitTime to arrive, as a 10 MB message under
// load did in CI's conformance run, must get the time on a later try.)
func TestPullDeadlineGrows(t *testing.T) {
	s := &subscription{wait: time.Second}
	s.pullWait = s.wait // as the first Pull's start sets it
	next := func(p *poll) time.Duration {
		t.Helper()
		s.inflight = p
		if err := s.collect(p); err != nil {
			t.Fatal(err)
		}
		s.stash = nil
		if s.pullWait < s.wait { // as start does
			s.pullWait = s.wait
		}
		return s.pullWait
	}
	var got []time.Duration
	for range 7 {
		got = append(got, next(&poll{cut: true}))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("deadlines after cut-off Pulls %v, want %v", got, want)
		}
	}
	if d := next(&poll{}); d != 30*time.Second {
		t.Fatalf("an empty answer changed the deadline to %v", d)
	}
	if d := next(&poll{msgs: []*pubsubpb.ReceivedMessage{{AckId: "a"}}}); d != time.Second {
		t.Fatalf("after a Pull that brought messages the deadline is %v, want WaitTime (1s)", d)
	}
}
