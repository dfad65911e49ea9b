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
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	// No sweep while the window is held (a sweep waits for the windows in
	// flight, and nothing is dispatched meanwhile).
	r := e.relay(topic, &outbox.RelayOptions{PollInterval: time.Minute}, postgres.SourceOptions{Pipeline: 1})
	g := e.runGated(r)
	ctx := g.ctx

	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	e.add(h, &outbox.Message{ID: "b-1", AggregateID: "b", Type: "x", Payload: []byte("{}")})
	select {
	case <-g.entered: // b's window is with the broker, held
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
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
