package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// streamOutboxEnv is an outbox env (a prefix of its own) whose stream's
// slot and publication are dropped at cleanup.
func streamOutboxEnv(t *testing.T) (*idemtest.OutboxEnv[pgx.Tx], *postgres.Store) {
	t.Helper()
	e := idemtest.SetupOutbox(t, newDB)
	st := e.Store.(*postgres.Store)
	requireStream(t, st)
	slot, err := st.StreamSlot(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for range 100 { // the walsender may still be exiting
			_, err := st.Pool().Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, _ = st.Pool().Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{slot}.Sanitize())
	})
	return e, st
}

// TestStreamSourceContract: the streaming source passes the contract
// every source passes (idemtest.SourceContract; the polling source passes
// it in the outbox suite).
func TestStreamSourceContract(t *testing.T) {
	e, st := streamOutboxEnv(t)
	sst, err := st.WithSource(postgres.SourceOptions{Stream: true, Pipeline: 2})
	if err != nil {
		t.Fatal(err)
	}
	idemtest.SourceContract(t, e, sst)
}

// TestOneSourceKind: one kind of source serves an outbox. While a relay
// streams it, a polling relay on the same tables refuses to claim
// (RunOnce and Drain fail with outbox.ErrOtherSource) or stands by (Run),
// publishing nothing; and once the stream's slot exists it still refuses,
// since a streaming relay would resume from the slot and publish again
// what it claimed. With the slot dropped it polls again.
func TestOneSourceKind(t *testing.T) {
	e, st := streamOutboxEnv(t)
	b := outboxBroker(t)
	sub := b.Subscribe(t)
	sst, err := st.WithSource(postgres.SourceOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.Ctx, time.Minute)
	defer cancel()
	streamer, err := outbox.NewRelay(sst, b.Topic, &outbox.RelayOptions{Owner: "streamer", PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopStream := context.WithCancel(ctx)
	streamed := make(chan error, 1)
	go func() { streamed <- streamer.Run(sctx) }()
	waitFor(ctx, t, "the relay streaming", func() bool { return streamer.Stats().Streaming })

	poller := e.Relay(b.Topic, &outbox.RelayOptions{Owner: "poller"})
	e.Add(idemtest.OM("k-1", "k", 1, "x"))
	if n, err := poller.RunOnce(ctx); n != 0 || !errors.Is(err, outbox.ErrOtherSource) {
		t.Fatalf("polling RunOnce beside a stream: %d published, %v; want 0, outbox.ErrOtherSource", n, err)
	}
	if n, err := poller.Drain(ctx); n != 0 || !errors.Is(err, outbox.ErrOtherSource) {
		t.Fatalf("polling Drain beside a stream: %d published, %v; want 0, outbox.ErrOtherSource", n, err)
	}
	pctx, stopPoll := context.WithCancel(ctx)
	polled := make(chan error, 1)
	go func() { polled <- poller.Run(pctx) }()
	waitFor(ctx, t, "the polling relay standing by", func() bool { return poller.Stats().Standby })
	waitFor(ctx, t, "k-1 published by the stream", func() bool { return streamer.Stats().Published == 1 })
	for got := 0; got < 1; got += len(idemtest.Drain(t, sub)) {
		if ctx.Err() != nil {
			t.Fatal("k-1 not received")
		}
	}

	// The streaming relay stops: its slot stays, and so does the refusal.
	stopStream()
	if err := <-streamed; err != nil {
		t.Fatal(err)
	}
	e.Add(idemtest.OM("k-2", "k", 2, "x"))
	if _, err := poller.RunOnce(ctx); !errors.Is(err, outbox.ErrOtherSource) {
		t.Fatalf("polling RunOnce beside the slot: %v; want outbox.ErrOtherSource", err)
	}
	if s := poller.Stats(); s.Published != 0 || !s.Standby {
		t.Fatalf("the polling relay published beside the stream: %+v", s)
	}
	stopPoll()
	if err := <-polled; err != nil {
		t.Fatal(err)
	}

	// The slot dropped, the outbox polls again.
	slot, _ := st.StreamSlot(ctx)
	waitFor(ctx, t, "the slot dropped (its walsender exits a moment after the relay stopped)", func() bool {
		_, err := st.Pool().Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
		return err == nil
	})
	if n, err := poller.Drain(ctx); n != 1 || err != nil {
		t.Fatalf("polling Drain without the slot: %d published, %v; want k-2", n, err)
	}
}

// TestStreamDrain: RunOnce and Drain work on the streaming source as on
// any other: Drain publishes what was committed before it from the stream
// (after the new slot's drain of the table) and returns once everything
// committed before the call is settled.
func TestStreamDrain(t *testing.T) {
	e, st := streamOutboxEnv(t)
	b := outboxBroker(t)
	sub := b.Subscribe(t)
	sst, err := st.WithSource(postgres.SourceOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(sst, b.Topic, &outbox.RelayOptions{Owner: "drainer", PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.Ctx, time.Minute)
	defer cancel()
	for i := range 5 {
		e.Add(idemtest.OM(fmt.Sprintf("d-%d", i), fmt.Sprintf("d%d", i%2), 0, "x"))
	}
	if n, err := r.Drain(ctx); n != 5 || err != nil { // from the table: the slot is new
		t.Fatalf("first Drain: %d published, %v; want 5", n, err)
	}
	for i := 5; i < 8; i++ {
		e.Add(idemtest.OM(fmt.Sprintf("d-%d", i), fmt.Sprintf("d%d", i%2), 0, "x"))
	}
	if n, err := r.Drain(ctx); n != 3 || err != nil { // from the stream
		t.Fatalf("second Drain: %d published, %v; want 3", n, err)
	}
	if n := len(e.Rows(outbox.Filter{States: []outbox.State{outbox.Pending}})); n != 0 {
		t.Errorf("%d rows pending after the drains", n)
	}
	for got := 0; got < 8; got += len(idemtest.Drain(t, sub)) {
		if ctx.Err() != nil {
			t.Fatalf("%d of 8 messages received", got)
		}
	}
}
