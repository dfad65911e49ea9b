package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestStreamCleanSweepDoesNotStopLanes: on a clear table the sweep that
// comes every 30 PollIntervals does not stop the lanes. While a window of
// aggregate "b" is held after its publish (its confirm not reported), rows
// of other aggregates, added one by one, are each published over several
// sweep periods, and b's later row waits for b's window. Before, the first
// sweep due waited for every window in flight to land, b's included, and
// nothing was dispatched meanwhile.
func TestStreamCleanSweepDoesNotStopLanes(t *testing.T) {
	e := setupStream(t, newPool(t))
	const poll = 2 * time.Millisecond // a sweep due every 60ms
	_, g, h, c := e.holdB(poll)
	e.add(h, &outbox.Message{ID: "b-2", AggregateID: "b", Type: "x", Payload: []byte("{}")})
	held := time.Now()
	// Rows go one by one until several sweeps have fallen due.
	n := e.addOthersWhileHeld(h, c, func() bool { return time.Since(held) < 4*30*poll })
	if k := c.count("b-2"); k != 0 {
		t.Errorf("b-2 arrived %d times while b-1's window was held", k)
	}
	e.releaseAndCheck(g, h, c, n+2)
}

// TestStreamStartsCleanWithoutSweep: a stream that starts on a clear
// table has nothing left to sweep, so its first sweep does not come after
// one PollInterval and stop the lanes. The relay starts again on a row of
// aggregate "b" committed while it was down, whose window is held after its
// publish; rows of other aggregates added meanwhile are published. Before,
// every stream started dirty: its sweep came after one PollInterval and
// waited for b's window, and nothing was dispatched meanwhile.
func TestStreamStartsCleanWithoutSweep(t *testing.T) {
	e := setupStream(t, newPool(t))
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	const poll = 100 * time.Millisecond // the periodic sweep 3s away
	first := e.relay(topic, &outbox.RelayOptions{PollInterval: poll}, postgres.SourceOptions{Pipeline: 1})
	stop := e.run(first)
	e.waitFor("the first relay to stream", func() bool { return first.Stats().Streaming })
	stop() // the slot stays, drained
	e.add(h, &outbox.Message{ID: "b-1", AggregateID: "b", Type: "x", Payload: []byte("{}")})

	r := e.relay(topic, &outbox.RelayOptions{PollInterval: poll}, postgres.SourceOptions{Pipeline: 1})
	g := e.runGated(r)
	ctx := g.ctx
	select {
	case <-g.entered: // b's window, streamed from the slot, is with the broker, held
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	held := time.Now()
	// Rows go one by one until past the first sweep's time.
	n := e.addOthersWhileHeld(h, c, func() bool { return time.Since(held) < 2*poll })
	e.releaseAndCheck(g, h, c, n+1)
}

// addOthersWhileHeld adds rows of other aggregates than b (c-0 of c0,
// c-1 of c1, ...), one transaction each, each waited for until it is
// published: at least three, and then while more holds. It returns how
// many.
func (e *streamEnv) addOthersWhileHeld(h *conformance.History, c *consumer, more func() bool) int {
	n := 0
	for ; n < 3 || more(); n++ {
		id := fmt.Sprintf("c-%d", n)
		e.add(h, &outbox.Message{ID: id, AggregateID: fmt.Sprintf("c%d", n), Type: "x", Payload: []byte("{}")})
		e.waitFor(id+" published while b's window is held", func() bool { return c.count(id) > 0 })
	}
	return n
}

// releaseAndCheck releases b's held window and waits for all rows
// published, each aggregate in order, the history valid and the table
// left with no pending or quarantined row.
func (e *streamEnv) releaseAndCheck(g *gate, h *conformance.History, c *consumer, all int) {
	e.t.Helper()
	close(g.release)
	e.waitFor("every row", func() bool { return c.distinct() == all })
	c.check(e.t, nil)
	if rep := h.Check(); !rep.Valid() {
		e.t.Errorf("history: %s", rep)
	}
	e.waitFor("the published rows deleted", func() bool { return e.rows(0, 2) == 0 })
}

// TestStreamPurgeOfNothingDoesNotStopLanes: a purge that deleted nothing
// (as the one a relay's Run makes as it starts, on a young outbox) leaves
// the table as it was, so it does not make the stream sweep. While a
// window of aggregate "b" is held after its publish, rows of other
// aggregates added after such a purge are published. Before, every purge
// asked the stream for a sweep, which waited for b's window, and nothing
// was dispatched meanwhile: the purge Run starts with, when it ended after
// the stream had opened, stopped the lanes of the tests above.
func TestStreamPurgeOfNothingDoesNotStopLanes(t *testing.T) {
	e := setupStream(t, newPool(t))
	r, g, h, c := e.holdB(time.Minute)
	if n, err := r.Purge(g.ctx); err != nil || n != 0 {
		t.Fatalf("Purge = %d, %v; want nothing purged", n, err)
	}
	n := e.addOthersWhileHeld(h, c, func() bool { return false })
	e.releaseAndCheck(g, h, c, n+1)
}
