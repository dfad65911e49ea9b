package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestStreamLaneDoesNotWaitForOtherAggregates: on one lane, while a
// window of aggregate "b" is with the broker (held after its publish, its
// confirm not reported), rows of other aggregates are published, and b's
// later rows wait for it: each aggregate arrives in sequence order.
func TestStreamLaneDoesNotWaitForOtherAggregates(t *testing.T) {
	e := setupStream(t, newPool(t))
	// No sweep while the window is held (a sweep waits for the windows in
	// flight, and nothing is dispatched meanwhile).
	_, g, h, c := e.holdB(time.Minute)
	e.add(h, &outbox.Message{ID: "b-2", AggregateID: "b", Type: "x", Payload: []byte("{}")})
	for i := range 5 {
		e.add(h, &outbox.Message{ID: fmt.Sprintf("c-%d", i), AggregateID: fmt.Sprintf("c%d", i), Type: "x", Payload: []byte("{}")})
	}
	e.waitFor("the other aggregates' rows published while b's window is held", func() bool {
		for i := range 5 {
			if c.count(fmt.Sprintf("c-%d", i)) == 0 {
				return false
			}
		}
		return true
	})
	if n := c.count("b-2"); n != 0 {
		t.Errorf("b-2 arrived %d times while b-1's window was held", n)
	}
	close(g.release)
	e.waitFor("every row", func() bool { return c.distinct() == 7 })
	c.check(t, nil)
	if rep := h.Check(); !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
}

// holdB runs a gated relay streaming on one lane (PollInterval poll), adds
// row b-1 of aggregate "b", and returns once b-1's window is with the
// broker, held (see runGated), with the relay, the gate, the history and
// the consumer.
func (e *streamEnv) holdB(poll time.Duration) (*outbox.Relay, *gate, *conformance.History, *consumer) {
	e.t.Helper()
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	r := e.relay(topic, &outbox.RelayOptions{PollInterval: poll}, postgres.SourceOptions{Pipeline: 1})
	g := e.runGated(r)
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	e.add(h, &outbox.Message{ID: "b-1", AggregateID: "b", Type: "x", Payload: []byte("{}")})
	select {
	case <-g.entered: // b's window is with the broker, held
	case <-g.ctx.Done():
		e.t.Fatal(g.ctx.Err())
	}
	return r, g, h, c
}

// runGated runs r until the test ends, each publish of aggregate "b" held
// after it by the gate it returns (see gate), whose ctx ends with the run.
func (e *streamEnv) runGated(r *outbox.Relay) *gate {
	ctx, cancel := context.WithCancel(e.ctx)
	g := &gate{entered: make(chan string, 1), release: make(chan struct{}), ctx: ctx}
	done := make(chan error, 1)
	go func() { done <- r.Run(failpoint.WithAfterPublish(ctx, g.after)) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
	return g
}
