package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestStreamSlotDropped: the slot is dropped under a streaming relay, and
// rows are committed while none exists. The relay re-creates the slot and
// publishes those rows from the table: nothing is lost, each aggregate in
// order.
func TestStreamSlotDropped(t *testing.T) {
	e := setupStream(t, newPool(t))
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	r := e.relay(topic, nil)
	e.run(r)
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	add := func(from, to int) {
		for i := from; i < to; i++ {
			e.add(h, &outbox.Message{ID: fmt.Sprintf("m%d", i), AggregateID: fmt.Sprintf("a%d", i%7), Payload: []byte("x")})
		}
	}
	add(0, 100)
	e.waitFor("the first rows", func() bool { return c.distinct() == 100 })
	e.dropSlot()
	add(100, 200) // some while no slot exists
	e.waitFor("every row", func() bool { return c.distinct() == 200 })
	e.waitFor("the relay to stream again", func() bool { return r.Stats().Streaming })
	add(200, 300)
	e.waitFor("every row", func() bool { return c.distinct() == 300 })
	if rep := h.Check(); !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
	c.check(t, nil)
	e.waitFor("the rows to leave the table", func() bool { return e.rows(0) == 0 })
}

// TestStreamIdleRetainsNoWAL: while the outbox is idle and other tables
// take writes, the relay confirms the keepalive's position: the slot's
// confirmed position follows the server's, and the slot retains no log
// for the outbox's sake.
func TestStreamIdleRetainsNoWAL(t *testing.T) {
	e := setupStream(t, newPool(t))
	topic, _ := rabbitStream(t)
	r := e.relay(topic, nil)
	e.run(r)
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	if _, err := e.pool.Exec(e.ctx, `CREATE TABLE noise (id BIGINT, pad TEXT)`); err != nil {
		t.Fatal(err)
	}
	for range 20 { // about 20 MB of log
		if _, err := e.pool.Exec(e.ctx, `INSERT INTO noise SELECT g, repeat('x', 800) FROM generate_series(1, 1000) g`); err != nil {
			t.Fatal(err)
		}
	}
	var after string
	if err := e.pool.QueryRow(e.ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the slot's confirmed position to pass the writes", func() bool {
		return e.count(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn >= $2::pg_lsn`, e.slot, after) == 1
	})
	st, err := e.st.Driver().Impl().(interface {
		OutboxStreamStatus(context.Context) (outbox.StreamStatus, error)
	}).OutboxStreamStatus(e.ctx)
	if err != nil || !st.Exists || !st.Active || st.Slot != e.slot || st.WALStatus == "" {
		t.Errorf("status %+v, %v", st, err)
	}
}

// TestStreamStandby: of two streaming relays one streams and the other
// stands by; when the first stops, the second takes over (within its
// PollInterval of the server letting go of the slot).
func TestStreamStandby(t *testing.T) {
	e := setupStream(t, newPool(t))
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	r1 := e.relay(topic, &outbox.RelayOptions{Owner: "one"})
	stop1 := e.run(r1)
	e.waitFor("the first relay to stream", func() bool { return r1.Stats().Streaming })
	r2 := e.relay(topic, &outbox.RelayOptions{Owner: "two"})
	e.run(r2)
	e.waitFor("the second relay to stand by", func() bool { return r2.Stats().Standby })
	for i := range 50 {
		e.add(h, &outbox.Message{ID: fmt.Sprintf("m%d", i), AggregateID: fmt.Sprintf("a%d", i%3), Payload: []byte("x")})
	}
	e.waitFor("the rows", func() bool { return c.distinct() == 50 })
	if r2.Stats().Published != 0 {
		t.Errorf("the standby published: %+v", r2.Stats())
	}
	stop1()
	e.waitFor("the second relay to take over", func() bool { return r2.Stats().Streaming })
	for i := 50; i < 100; i++ {
		e.add(h, &outbox.Message{ID: fmt.Sprintf("m%d", i), AggregateID: fmt.Sprintf("a%d", i%3), Payload: []byte("x")})
	}
	e.waitFor("the rows", func() bool { return c.distinct() == 100 })
	if rep := h.Check(); !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
	c.check(t, nil)
}

// streamChildEnv names the schema and the RabbitMQ exchange of
// TestStreamChild, the relay process TestStreamKill9 starts and kills.
const streamChildEnv = "WARY_STREAM_CHILD"

// TestStreamChild is the relay process of TestStreamKill9 (it skips
// otherwise): a streaming relay on the schema and exchange in
// WARY_STREAM_CHILD, running until killed.
func TestStreamChild(t *testing.T) {
	arg := os.Getenv(streamChildEnv)
	if arg == "" {
		t.Skip("the relay process of TestStreamKill9")
	}
	schema, exchange, _ := strings.Cut(arg, " ")
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rabbit.Dial(ctx, rabbitURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	topic, err := rabbit.OpenTopic(ctx, conn, rabbit.Topology{Exchange: exchange}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	sst, err := st.WithSource(postgres.SourceOptions{Stream: true, Pipeline: 4})
	if err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(sst, topic, &outbox.RelayOptions{BatchSize: 100, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx); err != nil { // until killed
		t.Fatal(err)
	}
}

// TestStreamKill9: the relay process is killed (SIGKILL) while it streams
// a backlog, and started again. Nothing is lost, each aggregate arrives in
// order, and the messages sent again are at most the windows in flight
// (Pipeline x BatchSize = 400).
func TestStreamKill9(t *testing.T) {
	pool := newPool(t)
	e := setupStream(t, pool)
	conn, name := rabbitQueue(t)
	sub, err := rabbit.OpenSubscription(t.Context(), conn, rabbit.Topology{Queue: name}, &rabbit.SubscriptionOptions{Prefetch: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	h := conformance.NewHistory()
	c := newConsumer(h)
	const n = 5000
	for i := 0; i < n; i += 10 {
		msgs := make([]*outbox.Message, 10)
		for j := range msgs {
			msgs[j] = &outbox.Message{ID: fmt.Sprintf("m%d", i+j), AggregateID: fmt.Sprintf("a%d", (i+j)%30), Payload: []byte("x")}
		}
		e.add(h, msgs...)
	}
	cctx, cancel := context.WithCancel(e.ctx)
	var cw sync.WaitGroup
	cw.Go(func() { consume(cctx, sub, c) })
	defer func() { cancel(); cw.Wait() }()
	schema := pool.Config().ConnConfig.RuntimeParams["search_path"]
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStreamChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), streamChildEnv+"="+schema+" "+name)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	first := start()
	e.waitFor("a part of the backlog", func() bool { return c.distinct() >= n/5 })
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	second := start()
	t.Cleanup(func() { _ = second.Process.Kill(); _ = second.Wait() })
	deadline := time.Now().Add(time.Minute)
	for c.distinct() < n {
		if time.Now().After(deadline) {
			var states string
			_ = e.pool.QueryRow(e.ctx, `SELECT string_agg(state || ':' || n, ' ') FROM (SELECT state, count(*) n FROM wary_outbox GROUP BY state) s`).Scan(&states)
			var slot string
			_ = e.admin.QueryRow(e.ctx, `SELECT coalesce(string_agg(active || ' ' || confirmed_flush_lsn || ' ' || pg_current_wal_lsn(), ','), 'none') FROM pg_replication_slots WHERE slot_name = $1`, e.slot).Scan(&slot)
			t.Fatalf("timed out waiting for every row: %d of %d received; outbox rows by state %q; slot (active, confirmed, now) %s", c.distinct(), n, states, slot)
		}
		time.Sleep(10 * time.Millisecond)
	}
	rep := h.Check()
	if !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
	c.check(t, nil)
	if len(rep.DuplicateDeliveries) > 400 {
		t.Errorf("%d messages sent again; want at most the windows in flight, 400", len(rep.DuplicateDeliveries))
	}
	t.Logf("history: %s", rep)
}

// TestStreamDrainsWhatItsCreatorDidNot: rows committed before the slot
// are in no stream; the relay that created the slot drains them from the
// table, and one that opens a slot whose creator stopped before it
// drained them (here: opened and closed without Drained) drains them
// too, rather than leave them to sweeps (which a long transaction in the
// database holds back: TestStreamKill9 waited a minute for them in CI).
func TestStreamDrainsWhatItsCreatorDidNot(t *testing.T) {
	e := setupStream(t, newPool(t))
	h := conformance.NewHistory()
	for i := range 100 {
		e.add(h, &outbox.Message{ID: fmt.Sprintf("m%d", i), AggregateID: fmt.Sprintf("a%d", i%7), Payload: []byte("x")})
	}
	open := func() postgres.LogStream {
		t.Helper()
		var s postgres.LogStream
		// The server lets the slot go once the last stream's WAL sender
		// has exited, a moment after its connection closed.
		e.waitFor("the slot to be let go", func() bool {
			var err error
			s, err = postgres.OpenStream(e.ctx, e.st, "t")
			if errors.Is(err, postgres.ErrStreamHeld) {
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			return true
		})
		return s
	}
	s := open()
	if !s.Fresh() {
		t.Fatal("the stream that created the slot is not fresh")
	}
	if err := s.Close(e.ctx); err != nil { // its relay stopped before it drained
		t.Fatal(err)
	}
	s = open()
	if !s.Fresh() {
		t.Fatal("a slot its creator did not drain is opened as drained")
	}
	if err := s.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	topic, c := e.consuming(h)
	r := e.relay(topic, nil)
	stop := e.run(r)
	e.waitFor("every row", func() bool { return c.distinct() == 100 })
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	stop()
	if n := e.rows(1); n != 100 {
		t.Errorf("%d rows marked sent by claims; want the 100 committed before the slot, drained", n)
	}
	if rep := h.Check(); !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
	c.check(t, nil)
	s = open()
	defer s.Close(e.ctx)
	if s.Fresh() {
		t.Error("the slot is fresh again after a relay drained it")
	}
}
