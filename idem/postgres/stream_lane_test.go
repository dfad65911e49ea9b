package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
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
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	g := &gate{entered: make(chan string, 1), release: make(chan struct{}), ctx: ctx}
	done := make(chan error, 1)
	go func() { done <- r.Run(failpoint.WithAfterPublish(ctx, g.after)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

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

// TestStreamLaneKeepsWindowsWithTheBroker: on one lane, while every
// window is held with the broker (its publish returned, not settled),
// rows of other aggregates keep going out, each in a window of its own,
// well past 8 windows at once: a reader of the log publishing each row
// keeps up to 256 confirms in flight, and a lane that stopped at 8 made
// the rows after them wait for a window to return, a whole confirm more.
func TestStreamLaneKeepsWindowsWithTheBroker(t *testing.T) {
	const rows = 20
	e := setupStream(t, newPool(t))
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	r := e.relay(topic, &outbox.RelayOptions{PollInterval: time.Minute}, postgres.SourceOptions{Pipeline: 1})
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	held := make(chan string, rows)
	release := make(chan struct{})
	hold := func(m *broker.Message) error {
		held <- m.ID
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(failpoint.WithAfterPublish(ctx, hold)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	for i := range rows {
		id := fmt.Sprintf("a-%d", i)
		e.add(h, &outbox.Message{ID: id, AggregateID: fmt.Sprintf("a%d", i), Type: "x", Payload: []byte("{}")})
		// Each row is published (and held) before the next is added: a
		// window of its own.
		e.waitFor(id+" published while the windows before it are held", func() bool { return c.count(id) == 1 })
	}
	for range rows {
		<-held
	}
	close(release)
	e.waitFor("every row", func() bool { return c.distinct() == rows })
	c.check(t, nil)
	if rep := h.Check(); !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
}
