package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// streamEnv is a store whose outbox streams, on a fresh schema; its slot
// and publication are dropped when the test ends.
type streamEnv struct {
	t     testing.TB
	ctx   context.Context
	pool  *pgxpool.Pool
	st    *postgres.Store
	ob    *outbox.Outbox[pgx.Tx]
	slot  string
	admin *pgx.Conn
}

// requireStream skips t, or fails it with WARY_REQUIRE_SERVICES=1, when
// the server cannot stream st's outbox.
func requireStream(t testing.TB, st *postgres.Store) {
	t.Helper()
	if err := st.CheckStream(t.Context()); err != nil {
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatalf("the server cannot stream the outbox: %v", err)
		}
		t.Skipf("the server cannot stream the outbox (WARY_REQUIRE_SERVICES=1 to fail): %v", err)
	}
}

func setupStream(t testing.TB, pool *pgxpool.Pool) *streamEnv {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	requireStream(t, st)
	slot, err := st.StreamSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &streamEnv{t: t, ctx: ctx, pool: pool, st: st, slot: slot}
	e.connectAdmin()
	t.Cleanup(func() {
		e.dropSlot()
		_, _ = e.admin.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{slot}.Sanitize())
		e.admin.Close(ctx)
	})
	e.ob, err = outbox.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// connectAdmin (re)opens the admin connection, to the pool's server.
func (e *streamEnv) connectAdmin() {
	e.t.Helper()
	if e.admin != nil {
		e.admin.Close(e.ctx)
	}
	admin, err := pgx.ConnectConfig(e.ctx, e.pool.Config().ConnConfig)
	if err != nil {
		e.t.Fatal(err)
	}
	e.admin = admin
}

// dropSlot ends the stream's walsender, if any, and drops its slot, if
// any (trying again while a relay takes it back meanwhile).
func (e *streamEnv) dropSlot() {
	for range 100 {
		_, err := e.admin.Exec(e.ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active`, e.slot)
		if err == nil {
			_, err = e.admin.Exec(e.ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, e.slot)
		}
		if err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond) // the walsender is exiting
	}
	e.t.Errorf("could not drop slot %s", e.slot)
}

// relay returns a streaming relay with fast test settings (and source
// settings so, if given).
func (e *streamEnv) relay(topic *broker.Topic, o *outbox.RelayOptions, so ...postgres.SourceOptions) *outbox.Relay {
	if o == nil {
		o = &outbox.RelayOptions{}
	}
	var src postgres.SourceOptions
	if len(so) > 0 {
		src = so[0]
	}
	src.Stream = true
	st, err := e.st.WithSource(src)
	if err != nil {
		e.t.Fatal(err)
	}
	if o.PollInterval == 0 {
		o.PollInterval = 20 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
		if os.Getenv("WARY_TEST_LOG") != "" {
			o.Logger = slog.Default()
		}
	}
	o.Backoff = broker.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}
	r, err := outbox.NewRelay(st, topic, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// run runs r until the test ends.
func (e *streamEnv) run(r *outbox.Relay) (stop func()) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("Run: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// add commits msgs in one transaction and records them as sent.
func (e *streamEnv) add(h *conformance.History, msgs ...*outbox.Message) {
	e.t.Helper()
	err := pgx.BeginFunc(e.ctx, e.pool, func(tx pgx.Tx) error {
		_, err := e.ob.Add(e.ctx, tx, msgs...)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range msgs {
		h.Sent(m.ID)
	}
}

// waitFor polls cond until it holds, or fails the test after a minute.
func (e *streamEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	idemtest.WaitFor(e.t, what, cond)
}

func (e *streamEnv) count(q string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.pool.QueryRow(e.ctx, q, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// pending counts rows still in the table in one of states.
func (e *streamEnv) rows(states ...int) int64 {
	return e.count(`SELECT count(*) FROM wary_outbox WHERE state = ANY($1)`, states)
}

// consumer records deliveries: IDs in the history, and each aggregate's
// sequences in the order they first arrived.
type consumer struct {
	mu    sync.Mutex
	h     *conformance.History
	seen  map[string]bool
	times map[string]int
	order map[string][]int64
	n     int
}

func newConsumer(h *conformance.History) *consumer {
	return &consumer{h: h, seen: map[string]bool{}, times: map[string]int{}, order: map[string][]int64{}}
}

func (c *consumer) deliver(m *broker.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.h.Delivered(m.ID)
	c.times[m.ID]++
	if c.seen[m.ID] {
		return
	}
	c.seen[m.ID] = true
	c.n++
	seq, _ := strconv.ParseInt(m.Headers.Get(broker.HeaderSequence), 10, 64)
	c.order[m.Key] = append(c.order[m.Key], seq)
}

// count returns how many times id arrived.
func (c *consumer) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.times[id]
}

func (c *consumer) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// check fails t unless each aggregate's first deliveries came in sequence
// order, 1, 2, 3, ... (skipping the sequences in skip).
func (c *consumer) check(t testing.TB, skip map[string][]int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for agg, seqs := range c.order {
		want := int64(1)
		for _, s := range seqs {
			for contains(skip[agg], want) {
				want++
			}
			if s != want {
				t.Errorf("aggregate %s: sequences arrived as %v", agg, seqs)
				break
			}
			want++
		}
	}
}

func contains(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// consuming returns a topic on a fresh RabbitMQ queue (rabbitStream) and
// a consumer of the queue recording into h, consuming until the test ends.
func (e *streamEnv) consuming(h *conformance.History) (*broker.Topic, *consumer) {
	topic, sub := rabbitStream(e.t)
	c := newConsumer(h)
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { consume(ctx, sub, c) })
	e.t.Cleanup(func() { cancel(); wg.Wait() })
	return topic, c
}

// consume receives from sub into c until ctx is done.
func consume(ctx context.Context, sub *broker.Subscription, c *consumer) {
	for ctx.Err() == nil {
		ds, err := sub.Receive(ctx, 100)
		if err != nil {
			return
		}
		for _, d := range ds {
			c.deliver(d.Message)
			_ = d.Ack(context.WithoutCancel(ctx))
		}
	}
}

// rabbitStream is a fresh RabbitMQ quorum queue's topic, failing every
// publish of a batch with a message whose ID starts with "poison-2", and
// its subscription.
func rabbitStream(t testing.TB) (*broker.Topic, *broker.Subscription) {
	b := rabbitBroker(t)
	topic := idemtest.FlakyTopic(b.Topic, func(m *broker.Message) bool { return strings.HasPrefix(m.ID, "poison-2") })
	return topic, b.Subscribe(t)
}

// TestStreamRelay: a streaming relay publishes concurrent producers'
// transactions (some committing out of their start order), one of 10,000
// rows, and a poison row, which is quarantined while its aggregate's later
// rows wait and other aggregates flow; discarded, its later rows follow.
// Nothing is lost, each aggregate arrives in sequence order, and published
// rows leave the table.
func TestStreamRelay(t *testing.T) {
	e := setupStream(t, newPool(t))
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	r := e.relay(topic, &outbox.RelayOptions{BatchSize: 200, MaxAttempts: 1}, postgres.SourceOptions{Pipeline: 4})
	e.run(r)
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })

	// Two transactions commit out of their start order.
	tx1, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ob.Add(e.ctx, tx1, &outbox.Message{ID: "late-1", AggregateID: "late", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	e.add(h, &outbox.Message{ID: "early-1", AggregateID: "early", Payload: []byte("x")})
	if err := tx1.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	h.Sent("late-1")

	// Concurrent producers on shared aggregates.
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			for i := range 50 {
				e.add(h, &outbox.Message{ID: fmt.Sprintf("p%d-%d", p, i), AggregateID: fmt.Sprintf("agg-%d", (p+i)%5), Payload: []byte("x")})
			}
		})
	}
	// A poison row (the topic rejects it) between good rows of its aggregate.
	e.add(h, &outbox.Message{ID: "poison-1", AggregateID: "poison", Payload: []byte("ok")})
	e.add(conformance.NewHistory(), &outbox.Message{ID: "poison-2", AggregateID: "poison", Payload: []byte("x")})
	e.add(h, &outbox.Message{ID: "poison-3", AggregateID: "poison", Payload: []byte("ok")})
	// One transaction of 10,000 rows over 10 aggregates.
	big := make([]*outbox.Message, 10000)
	for i := range big {
		big[i] = &outbox.Message{ID: fmt.Sprintf("big-%d", i), AggregateID: fmt.Sprintf("big-%d", i%10), Payload: []byte("x")}
	}
	e.add(h, big...)
	wg.Wait()
	e.add(h, &outbox.Message{ID: "after", AggregateID: "agg-0", Payload: []byte("x")})

	// Every good row arrives but poison-3, which waits behind the
	// quarantined row (unless the failed window's first attempt, a single
	// Publish of the window, delivered it: the broker's error does not say
	// which messages of a batch went through; see publishBatch).
	total := 2 + 400 + 1 + 10000 + 1
	e.waitFor("every good row to arrive", func() bool { return c.distinct()-min(c.count("poison-3"), 1) == total })
	e.waitFor("the poison row's quarantine", func() bool { return e.rows(2) == 1 })
	// poison-3 waits in the table, behind the quarantined row (unless delivered).
	e.waitFor("the good rows to leave the table", func() bool { return e.rows(0) == int64(1-min(c.count("poison-3"), 1)) })
	q, err := r.Quarantined(e.ctx, 0)
	if err != nil || len(q) != 1 || q[0].ID != "poison-2" {
		t.Fatalf("quarantined: %v, %v", q, err)
	}
	if ok, err := r.Discard(e.ctx, q[0].RowID); !ok || err != nil {
		t.Fatalf("discard: %v, %v", ok, err)
	}
	e.waitFor("poison-3 after the discard", func() bool { return c.distinct() == total+1 })
	e.waitFor("published rows to leave the table", func() bool { return e.rows(0) == 0 })
	// Published rows were deleted in bulk, not marked sent one by one; but
	// poison-3, claimed after the discard, and rows of the transaction of
	// 10,000 (open for longer than the sweep's lag: a sweep may claim
	// them before the stream reaches them; see streamLoop.sweep).
	if n := e.count(`SELECT count(*) FROM wary_outbox WHERE state = 1 AND aggregate_id NOT LIKE 'big-%' AND message_id <> 'poison-3'`); n > 0 {
		var ids []string
		rs, _ := e.pool.Query(e.ctx, `SELECT message_id || ' ' || created_at::text || ' ' || sent_at::text FROM wary_outbox WHERE state = 1 ORDER BY id LIMIT 5`)
		for rs.Next() {
			var id string
			_ = rs.Scan(&id)
			ids = append(ids, id)
		}
		rs.Close()
		t.Errorf("%d rows marked sent (%v); want them deleted in bulk", n, ids)
	}
	rep := h.Check()
	if !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
	c.check(t, map[string][]int64{"poison": {2}})
	if s := r.Stats(); !s.Streaming || s.Quarantines != 1 {
		t.Errorf("stats %+v", s)
	}
}

// checkCounter counts the outbox stream's window checks (Publishable's
// statement) sent on a pool.
type checkCounter struct{ n atomic.Int64 }

func (c *checkCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "CROSS JOIN LATERAL") {
		c.n.Add(1)
	}
	return ctx
}

func (*checkCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestStreamChecksWhileNotClear: a streaming relay publishes its windows
// without checking them against the table while the table is Clear; from
// a row that fails (quarantined, its aggregate's later rows held back) it
// checks them, and holds back the rows of that aggregate that come later;
// once the quarantined row is discarded and the held rows claimed, the
// windows go unchecked again. Nothing is lost, each aggregate in order.
func TestStreamChecksWhileNotClear(t *testing.T) {
	var checks checkCounter
	e := setupStream(t, newPoolConfig(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = &checks }))
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	r := e.relay(topic, &outbox.RelayOptions{BatchSize: 50, MaxAttempts: 1}, postgres.SourceOptions{Pipeline: 2})
	e.run(r)
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	addMany := func(prefix string, n int) {
		for i := 0; i < n; i += 50 {
			var msgs []*outbox.Message
			for j := i; j < min(i+50, n); j++ {
				msgs = append(msgs, &outbox.Message{ID: fmt.Sprintf("%s-%d", prefix, j), AggregateID: fmt.Sprintf("agg-%d", j%10), Payload: []byte("x")})
			}
			e.add(h, msgs...)
		}
	}
	addMany("clear", 300)
	e.waitFor("the rows on a clear table", func() bool { return c.distinct() == 300 })
	if n := checks.n.Load(); n != 0 {
		t.Fatalf("%d windows checked on a clear table; want none", n)
	}

	e.add(h, &outbox.Message{ID: "poison-1", AggregateID: "poison", Payload: []byte("x")})
	e.add(conformance.NewHistory(), &outbox.Message{ID: "poison-2", AggregateID: "poison", Payload: []byte("x")})
	e.add(h, &outbox.Message{ID: "poison-3", AggregateID: "poison", Payload: []byte("x")})
	e.waitFor("the poison row's quarantine", func() bool { return e.rows(2) == 1 })
	before := checks.n.Load()
	e.add(h, &outbox.Message{ID: "poison-4", AggregateID: "poison", Payload: []byte("x")})
	addMany("after", 100)
	e.waitFor("the other rows after the quarantine", func() bool { return c.distinct() == 300+1+100-min(c.count("poison-3"), 1) })
	if checks.n.Load() == before {
		t.Fatal("no window checked while the table holds a quarantined row")
	}
	if c.count("poison-4") > 0 {
		t.Fatal("poison-4 published while poison-2, before it, is quarantined")
	}
	// The held rows are marked for the claims only once their windows
	// settle (poison-3 may have gone out with the failed window's first
	// attempt; see TestStreamRelay).
	e.waitFor("the held rows marked for the claims only", func() bool {
		return e.count(`SELECT count(*) FROM wary_outbox WHERE message_id IN ('poison-3', 'poison-4') AND state = 0 AND claims_only`) ==
			2-int64(min(c.count("poison-3"), 1))
	})

	q, err := r.Quarantined(e.ctx, 0)
	if err != nil || len(q) != 1 || q[0].ID != "poison-2" {
		t.Fatalf("quarantined: %v, %v", q, err)
	}
	if ok, err := r.Discard(e.ctx, q[0].RowID); !ok || err != nil {
		t.Fatalf("discard: %v, %v", ok, err)
	}
	e.waitFor("the held rows after the discard", func() bool { return c.count("poison-3") > 0 && c.count("poison-4") > 0 })
	// Clear again: a row published without a check.
	i := 0
	e.waitFor("a window published unchecked", func() bool {
		before := checks.n.Load()
		id := fmt.Sprintf("probe-%d", i)
		i++
		e.add(h, &outbox.Message{ID: id, AggregateID: "probe", Payload: []byte("x")})
		e.waitFor(id, func() bool { return c.count(id) > 0 })
		return checks.n.Load() == before
	})
	before = checks.n.Load()
	addMany("clear-again", 200)
	e.waitFor("the rows on a clear table again", func() bool { return h.Check().Valid() })
	if n := checks.n.Load() - before; n != 0 {
		t.Errorf("%d windows checked on a clear table again; want none", n)
	}
	if rep := h.Check(); !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
	c.check(t, map[string][]int64{"poison": {2}})
}
