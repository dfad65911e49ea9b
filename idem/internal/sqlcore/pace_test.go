package sqlcore

import (
	"errors"
	"testing"
	"time"
)

// TestPace: the relay's poll policy, case by case, and that it asks for
// another loop's batch in flight and for the wake-up only when it needs
// them (asking the wake-up has a cost: it may set the relay's flag).
func TestPace(t *testing.T) {
	const poll = time.Second
	landed := make(chan struct{})
	none := func() <-chan struct{} { return nil }
	inFlight := func() <-chan struct{} { return landed }
	wake := func(d time.Duration) func() time.Duration { return func() time.Duration { return d } }
	fail := errors.New("broker down")
	for _, c := range []struct {
		name    string
		claimed int
		err     error
		aloft   func() <-chan struct{}
		idle    func() time.Duration
		want    step
	}{
		{"work: claim again", 5, nil, nil, nil, step{again: true}},
		{"failure: poll", 0, fail, nil, nil, step{wait: poll, idle: true}},
		{"failure after claiming: poll", 5, fail, nil, nil, step{wait: poll, idle: true}},
		{"behind a large batch: wait for it", 0, nil, inFlight, nil, step{wait: poll, landed: landed}},
		{"nothing, no wake-up: poll", 0, nil, none, wake(0), step{wait: poll, idle: true}},
		{"wake-up just set: claim once more", 0, nil, none, wake(-1), step{again: true}},
		{"producers in flight: poll sooner", 0, nil, none, wake(time.Millisecond), step{wait: time.Millisecond, idle: true}},
		{"wake-up asks more than poll: poll", 0, nil, none, wake(time.Hour), step{wait: poll, idle: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			aloft, idle := c.aloft, c.idle
			if aloft == nil {
				aloft = func() <-chan struct{} { t.Fatal("asked for a batch in flight"); return nil }
			}
			if idle == nil {
				idle = func() time.Duration { t.Fatal("asked the wake-up"); return 0 }
			}
			if got := pace(poll, c.claimed, c.err, aloft, idle); got != c.want {
				t.Errorf("pace = %+v, want %+v", got, c.want)
			}
		})
	}
}
