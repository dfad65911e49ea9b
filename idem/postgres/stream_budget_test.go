package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestStreamWALBudget: a slot that retains more WAL than the budget while
// its relay is down is dropped when a relay comes back; the relay polls
// the table, then streams from a new slot. Every row is published once,
// each aggregate in order, and the release is counted (the relay's stats,
// the stream's status).
func TestStreamWALBudget(t *testing.T) {
	e := setupStream(t, newPool(t))
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	const budget = 4 << 20
	so := postgres.SourceOptions{StreamRetry: time.Second, WALBudget: budget}
	msg := func(i int) *outbox.Message {
		return &outbox.Message{ID: fmt.Sprintf("m-%d", i), AggregateID: fmt.Sprintf("agg-%d", i%7), Payload: []byte("x")}
	}
	n := 0
	addSome := func(k int) {
		for range k {
			e.add(h, msg(n))
			n++
		}
	}

	r := e.relay(topic, nil, so)
	stop := e.run(r)
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	addSome(20)
	e.waitFor("the rows streamed", func() bool { return c.distinct() == n })
	stop()

	// The relay is down: rows are committed, and the server writes more
	// WAL than the budget (messages no publication carries).
	addSome(50)
	for range 2 * budget >> 20 {
		if _, err := e.pool.Exec(e.ctx, `SELECT pg_logical_emit_message(false, 'wary-test', repeat('x', 1 << 20))`); err != nil {
			t.Fatal(err)
		}
	}
	addSome(50)
	st, err := e.st.Driver().Impl().(interface {
		OutboxStreamStatus(context.Context) (outbox.StreamStatus, error)
	}).OutboxStreamStatus(e.ctx)
	if err != nil || !st.Exists || st.LagBytes <= budget || st.Released != 0 {
		t.Fatalf("before the relay comes back: %+v, %v; want the slot over the budget", st, err)
	}

	r = e.relay(topic, nil, so)
	e.run(r)
	e.waitFor("the slot released", func() bool { return r.Stats().SlotReleases > 0 })
	e.waitFor("every row", func() bool { return c.distinct() == n })
	e.waitFor("a new slot, streamed", func() bool {
		st, err = e.st.Driver().Impl().(interface {
			OutboxStreamStatus(context.Context) (outbox.StreamStatus, error)
		}).OutboxStreamStatus(e.ctx)
		return err == nil && st.Exists && st.Active && r.Stats().Streaming
	})
	if st.Released < 1 || st.ReleasedLag <= budget || st.ReleasedAt.IsZero() {
		t.Errorf("status after the release: %+v", st)
	}
	if s := r.Stats(); s.SlotReleasedAt.IsZero() {
		t.Errorf("stats after the release: %+v", s)
	}
	// The new slot streams what comes next.
	addSome(30)
	e.waitFor("the rows after the release", func() bool { return c.distinct() == n })
	e.waitFor("the table empty", func() bool { return e.rows(0) == 0 })
	for i := range n {
		if k := c.count(msg(i).ID); k != 1 {
			t.Errorf("%s arrived %d times; want once", msg(i).ID, k)
		}
	}
	c.check(t, nil)
	if rep := h.Check(); !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
}

// TestStreamWALBudgetStalled: a relay that streams while its broker
// stalls (its window of rows never confirmed) lets go of its slot once the
// slot retains more WAL than the budget, releases it and polls; once the
// broker is back, every row is published once, each aggregate in order,
// and the relay streams again from a new slot.
func TestStreamWALBudgetStalled(t *testing.T) {
	e := setupStream(t, newPool(t))
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	g := &stallTopic{inner: topic, open: make(chan struct{})}
	gated := broker.NewTopic(g, &broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1},
		Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
	const budget = 4 << 20
	r := e.relay(gated, nil, postgres.SourceOptions{StreamRetry: 500 * time.Millisecond, WALBudget: budget})
	e.run(r)
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	var ids []string
	for i := range 40 {
		m := &outbox.Message{ID: fmt.Sprintf("m-%d", i), AggregateID: fmt.Sprintf("agg-%d", i%7), Payload: []byte("x")}
		e.add(h, m)
		ids = append(ids, m.ID)
	}
	e.waitFor("the broker to stall", func() bool { return g.waiting.Load() > 0 })
	for range 2 * budget >> 20 {
		if _, err := e.pool.Exec(e.ctx, `SELECT pg_logical_emit_message(false, 'wary-test', repeat('x', 1 << 20))`); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor("the slot released", func() bool { return r.Stats().SlotReleases > 0 })
	if n := c.distinct(); n != 0 {
		t.Fatalf("%d rows arrived through a stalled broker", n)
	}
	close(g.open)
	e.waitFor("every row", func() bool { return c.distinct() == len(ids) })
	e.waitFor("a new slot, streamed", func() bool {
		st, err := e.st.Driver().Impl().(interface {
			OutboxStreamStatus(context.Context) (outbox.StreamStatus, error)
		}).OutboxStreamStatus(e.ctx)
		return err == nil && st.Exists && st.Active && r.Stats().Streaming
	})
	e.add(h, &outbox.Message{ID: "after", AggregateID: "agg-0", Payload: []byte("x")})
	ids = append(ids, "after")
	e.waitFor("the row after the release", func() bool { return c.count("after") > 0 })
	for _, id := range ids {
		if k := c.count(id); k != 1 {
			t.Errorf("%s arrived %d times; want once", id, k)
		}
	}
	c.check(t, nil)
	if rep := h.Check(); !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
}

// stallTopic is a broker that stalls until open is closed: each publish waits
// for it (or for its context), then goes to inner.
type stallTopic struct {
	inner   *broker.Topic
	open    chan struct{}
	waiting atomic.Int64 // publishes that waited
}

func (g *stallTopic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	select {
	case <-g.open:
	default:
		g.waiting.Add(1)
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	bms := make([]*broker.Message, len(msgs))
	for i, m := range msgs {
		bms[i] = &broker.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body}
	}
	return g.inner.Publish(ctx, bms...)
}

func (g *stallTopic) Capabilities() capability.Topic  { return g.inner.Capabilities() }
func (g *stallTopic) Classify(error) driver.ErrorInfo { return driver.ErrorInfo{} }
func (g *stallTopic) As(any) bool                     { return false }
func (g *stallTopic) ErrorAs(error, any) bool         { return false }
func (g *stallTopic) Close() error                    { return nil }
