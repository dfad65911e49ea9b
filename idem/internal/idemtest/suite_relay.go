package idemtest

import (
	"github.com/wary-go/wary/broker"

	"context"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/outbox"
)

// fakeNow is a clock for relays and outboxes.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeNow) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func testHealthPurge[Tx any](t *testing.T, f Factory[Tx], b OutboxBroker, _ OutboxCaps) {
	e := SetupOutbox(t, f)
	sub := b.Subscribe(t)
	clock := &fakeNow{t: time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)}
	ob, err := outbox.New(e.Store, &outbox.Options{Telemetry: broker.Telemetry{Now: clock.Now}})
	if err != nil {
		t.Fatal(err)
	}
	add := func(msgs ...*outbox.Message) []int64 {
		var seqs []int64
		e.InTx(func(tx Tx) error { seqs, err = ob.Add(e.Ctx, tx, msgs...); return err })
		return seqs
	}
	add(OM("a-1", "a", 1, "x"), OM("a-2", "a", 2, "x"), OM("a-3", "a", 3, "x"))
	clock.Advance(10 * time.Minute)
	r := e.Relay(b.Topic, &outbox.RelayOptions{Telemetry: broker.Telemetry{Now: clock.Now}, PurgeBatch: 2})
	h, err := r.Health(e.Ctx)
	if err != nil || h.Backlog != 3 || h.OldestUnsentAge != 10*time.Minute || h.Quarantined != 0 || h.Retrying != 0 {
		t.Errorf("health %+v, %v; want backlog 3, oldest 10m", h, err)
	}
	if n, err := r.Drain(e.Ctx); n != 3 || err != nil {
		t.Fatalf("Drain: %d, %v", n, err)
	}
	h, err = r.Health(e.Ctx)
	if err != nil || h.Backlog != 0 || !h.OldestUnsent.IsZero() || h.Published != 3 || h.Throughput <= 0 {
		t.Errorf("health %+v, %v; want empty backlog, 3 published, a throughput", h, err)
	}
	clock.Advance(6 * 24 * time.Hour)
	if n, err := r.Purge(e.Ctx); n != 0 || err != nil {
		t.Errorf("Purge before the retention: %d, %v", n, err)
	}
	clock.Advance(2 * 24 * time.Hour)
	if n, err := r.Purge(e.Ctx); n != 3 || err != nil {
		t.Errorf("Purge after the retention: %d, %v; want 3 (in batches of 2)", n, err)
	}
	if rows := e.Rows(outbox.Filter{}); len(rows) != 0 {
		t.Errorf("%d rows left", len(rows))
	}
	// The counter survives the purge: sequences go on.
	if seqs := add(OM("a-4", "a", 4, "x")); seqs[0] != 4 {
		t.Errorf("sequence after purge: %d, want 4", seqs[0])
	}
	// Pending and quarantined rows are never purged.
	clock.Advance(30 * 24 * time.Hour)
	if n, err := r.Purge(e.Ctx); n != 0 || err != nil {
		t.Errorf("Purge of a pending row: %d, %v", n, err)
	}
	if n, _ := r.Drain(e.Ctx); n != 1 {
		t.Errorf("Drain: %d", n)
	}
	if msgs := Drain(t, sub); len(msgs) != 4 {
		t.Errorf("received %v", ids(msgs))
	}
}

func testWakeup[Tx any](t *testing.T, f Factory[Tx], b OutboxBroker, caps OutboxCaps) {
	e := SetupOutbox(t, f)
	sub := b.Subscribe(t)
	r := e.Relay(b.Topic, &outbox.RelayOptions{PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	// Wait until Run is listening (where the store can) and has gone to
	// sleep for an hour: from then on only a notification or Wake finds
	// the row.
	listens := caps.ConcurrentWriters && !caps.Polls // PostgreSQL: NOTIFY
	for deadline := time.Now().Add(10 * time.Second); ; {
		s := r.Stats()
		if s.Idle > 0 && (s.Listening || !listens) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not start listening and go idle within 10s: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
	e.Add(OM("w-1", "w", 1, "x"))
	if !listens {
		r.Wake() // no NOTIFY: the producer wakes its in-process relay
	}
	var got int
	for deadline := time.Now().Add(10 * time.Second); got == 0 && time.Now().Before(deadline); {
		got += len(Drain(t, sub))
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if got != 1 {
		t.Fatalf("the relay did not wake up (listens: %v)", listens)
	}
	t.Logf("woken by %s", map[bool]string{true: "NOTIFY", false: "Wake"}[listens])
}
