package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestWakeAddWaitsForIdle proves the second half of the wake-up's race
// argument (see sqlcore's IdleOutbox): an adding transaction that asks for
// the wake lock while a relay going idle holds it waits until that relay
// has set its flag and committed, and then notifies, although the flag was
// unset when the adding transaction began.
// Adds of one row and of several take different statements.
func TestWakeAddWaitsForIdle(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint("rows=", n), func(t *testing.T) { testWakeAddWaitsForIdle(t, n) })
	}
}

func testWakeAddWaitsForIdle(t *testing.T, rows int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, schema := newListenStoreSchema(ctx, t)
	pg, box, calls, stop := listeningOn(ctx, t, st)
	key := postgres.WakeKey(pg)
	// A relay going idle, stopped between its lock and its commit.
	idle, err := idemtest.D(pg).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = idle.Rollback(context.Background()) }()
	var ok bool
	if err := idle.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", key).Scan(&ok); err != nil || !ok {
		t.Fatalf("wake lock: %v, %v", ok, err)
	}
	if _, err := idle.Exec(ctx, "INSERT INTO "+schema+"."+postgres.DefaultPrefix+"outbox_wake (name, idle) VALUES ('relay:t', TRUE)"); err != nil {
		t.Fatal(err)
	}
	// A producer begins (reading no flag yet) and adds a row.
	tx, err := idemtest.D(pg).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	added := make(chan error, 1)
	go func() {
		msgs := make([]*outbox.Message, rows)
		for i := range msgs {
			msgs[i] = &outbox.Message{AggregateID: fmt.Sprint("a", i%2), Type: "x", Payload: []byte("{}")}
		}
		_, err := box.Add(ctx, tx, msgs...)
		added <- err
	}()
	// Its first statement waits for the lock.
	for {
		var waiting int
		err := pg.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1`,
			key).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-added:
			t.Fatalf("Add did not wait for the wake lock held by a relay going idle: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	if err := idle.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calls:
	case <-ctx.Done():
		t.Fatal("no notification from a producer that waited for the wake lock")
	}
	stop()
}

// TestWakeFlagPerRelay proves that each relay has its own wake flag: a
// relay that finds work clears only its own, so producers keep notifying
// while another relay waits; a flag not renewed in time is swept by the
// next relay going idle; a REPEATABLE READ producer always notifies.
func TestWakeFlagPerRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg := newListenStore(ctx, t)
	box, err := outbox.New[pgx.Tx](pg, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, pg.Pool().Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	channel := pgx.Identifier{postgres.OutboxChannel(pg)}.Sanitize()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}
	add := func(opts pgx.TxOptions) {
		t.Helper()
		tx, err := pg.Pool().BeginTx(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := box.Add(ctx, tx, &outbox.Message{AggregateID: "w", Type: "x", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	notified := func(want bool) {
		t.Helper()
		// A marker: notifications arrive in commit order.
		if _, err := pg.Pool().Exec(ctx, "NOTIFY "+channel+", 'marker'"); err != nil {
			t.Fatal(err)
		}
		got := false
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n.Payload == "marker" {
				break
			}
			got = true
		}
		if got != want {
			t.Fatalf("notified: %v, want %v", got, want)
		}
	}
	mustIdle := func(owner string, ttl time.Duration) {
		t.Helper()
		if ok, err := pg.Driver().Impl().(idler).IdleOutbox(ctx, owner, ttl); !ok || err != nil {
			t.Fatalf("IdleOutbox(%s): %v, %v", owner, ok, err)
		}
	}
	for _, owner := range []string{"a", "b"} {
		if err := pg.Driver().Impl().(idler).BusyOutbox(ctx, owner); err != nil {
			t.Fatal(err)
		}
	}
	add(pgx.TxOptions{})
	notified(false)
	mustIdle("a", time.Minute)
	mustIdle("b", time.Minute)
	if err := pg.Driver().Impl().(idler).BusyOutbox(ctx, "b"); err != nil { // b found work; a still waits
		t.Fatal(err)
	}
	add(pgx.TxOptions{})
	notified(true)
	if err := pg.Driver().Impl().(idler).BusyOutbox(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	add(pgx.TxOptions{})
	notified(false)
	add(pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	notified(true)
	// a's flag runs out; b going idle sweeps it, and a's renewal finds it
	// gone.
	mustIdle("a", -time.Second)
	mustIdle("b", time.Minute)
	if ok, err := pg.Driver().Impl().(idler).RenewIdleOutbox(ctx, "a", time.Minute); ok || err != nil {
		t.Fatalf("RenewIdleOutbox of a swept flag: %v, %v; want false", ok, err)
	}
	if ok, err := pg.Driver().Impl().(idler).RenewIdleOutbox(ctx, "b", time.Minute); !ok || err != nil {
		t.Fatalf("RenewIdleOutbox of a set flag: %v, %v; want true", ok, err)
	}
	if err := pg.Driver().Impl().(idler).BusyOutbox(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	add(pgx.TxOptions{})
	notified(false)
}

// gate blocks the relays' failpoint (failpoint.WithAfterPublish) on aggregate "b" rows until
// released, and reports on entered when it blocks.
type gate struct {
	entered chan string
	release chan struct{}
	ctx     context.Context // ends the wait
}

func (g *gate) after(m *broker.Message) error {
	if m.Key != "b" {
		return nil
	}
	g.entered <- m.ID
	select {
	case <-g.release:
	case <-g.ctx.Done():
	}
	return nil
}

// TestRelayWakesWhileAnotherIsBusy: with two relays on one pg, one busy
// publishing (it found work after waiting, and cleared its wake flag) and
// the other waiting, a commit wakes the waiting one. Both poll once a
// minute, so the row arrives within the test's deadline only if the
// waiting relay is notified.
func TestRelayWakesWhileAnotherIsBusy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pg := newListenStore(ctx, t)
	box, err := outbox.New[pgx.Tx](pg, nil)
	if err != nil {
		t.Fatal(err)
	}
	topic := outboxBroker(t).Topic
	add := func(agg string) {
		t.Helper()
		tx, err := idemtest.D(pg).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := box.Add(ctx, tx, &outbox.Message{AggregateID: agg, Type: "x", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if err := idemtest.D(pg).Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	rctx, stopRelays := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopRelays()
	start := func(owner string, st idem.Store[pgx.Tx], after func(*broker.Message) error) *outbox.Relay {
		r, err := outbox.NewRelay(st, topic, &outbox.RelayOptions{Owner: owner, PollInterval: time.Minute,
			PurgeInterval: -1, Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := r.Run(failpoint.WithAfterPublish(rctx, after)); err != nil {
				t.Errorf("Run %s: %v", owner, err)
			}
		})
		waitFor(ctx, t, owner+" listening and idle", func() bool { s := r.Stats(); return s.Listening && s.Idle > 0 })
		return r
	}
	g := &gate{entered: make(chan string, 4), release: make(chan struct{}), ctx: rctx}
	entered := func() {
		t.Helper()
		select {
		case <-g.entered:
		case <-ctx.Done():
			t.Fatal("the busy relay did not publish a b row")
		}
	}
	one, err := pg.WithSource(postgres.SourceOptions{Pipeline: 1})
	if err != nil {
		t.Fatal(err)
	}
	busy := start("busy", one, g.after)
	add("b") // b:1 wakes busy, which holds it
	entered()
	// The waiter renews its flag just before it waits, when it found
	// nothing (b:1 is held).
	ws := &renewCounter{pgDriver: pg.Driver().Impl().(pgDriver)}
	hooked, err := postgres.Hooked(pg, postgres.SourceOptions{Pipeline: 1}, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	waiter := start("waiter", hooked, nil)
	waitFor(ctx, t, "the waiter waiting", func() bool { return ws.renewals.Load() > 0 })
	n := ws.renewals.Load()
	add("b") // b:2 waits behind b:1: the waiter looks, finds nothing to claim, waits again
	waitFor(ctx, t, "the waiter woken and waiting again", func() bool { return ws.renewals.Load() > n })
	select { // busy marks b:1, clears its flag, claims b:2 and holds it
	case g.release <- struct{}{}:
	case <-ctx.Done():
		t.Fatal("the busy relay is not holding b:1")
	}
	entered()
	add("a")
	waitFor(ctx, t, "a:1 published by the waiting relay", func() bool { return waiter.Stats().Published == 1 })
	close(g.release)
	waitFor(ctx, t, "b:2 published", func() bool { return busy.Stats().Published == 2 })
}

// renewCounter counts a relay's renewals of its wake flag: a relay renews
// it just before it waits.
type renewCounter struct {
	pgDriver
	renewals atomic.Int64
}

// pgDriver is the PostgreSQL store's driver with its wake flag and LISTEN.
type pgDriver interface {
	idemtest.Driver[pgx.Tx]
	idler
	listener
}

// idler and listener are the PostgreSQL driver's wake flag and LISTEN,
// which its relays' wake-up uses.
type idler interface {
	IdleOutbox(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	RenewIdleOutbox(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	BusyOutbox(ctx context.Context, owner string) error
}

type listener interface {
	ListenOutbox(ctx context.Context, notify func()) error
}

func (s *renewCounter) RenewIdleOutbox(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	ok, err := s.pgDriver.RenewIdleOutbox(ctx, owner, ttl)
	if ok {
		s.renewals.Add(1)
	}
	return ok, err
}

// TestRelayNeverSleepsThroughCommit: one relay polling once a minute, and
// single rows committed at varied moments after the previous one was
// published, so that commits race with the relay going idle. Every row
// must be published within the test's deadline: a commit slept through
// would wait for the minute's poll.
func TestRelayNeverSleepsThroughCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	pg := newListenStore(ctx, t)
	box, err := outbox.New[pgx.Tx](pg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(pg, outboxBroker(t).Topic, &outbox.RelayOptions{PollInterval: time.Minute, PurgeInterval: -1,
		Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopRelay := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		stopRelay()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(ctx, t, "listening and idle", func() bool { s := r.Stats(); return s.Listening && s.Idle > 0 })
	const rounds = 150
	for i := range rounds {
		// Vary the moment of the commit against the relay's going idle
		// (a few milliseconds after the last publish), not a wait for it.
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		tx, err := idemtest.D(pg).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := box.Add(ctx, tx, &outbox.Message{AggregateID: fmt.Sprint("a", i%7), Type: "x", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if err := idemtest.D(pg).Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, fmt.Sprintf("row %d published", i+1), func() bool { return r.Stats().Published == int64(i+1) })
	}
}

// waitFor polls cond until it holds, failing t when ctx ends first.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within the test's deadline", what)
		case <-time.After(time.Millisecond):
		}
	}
}
