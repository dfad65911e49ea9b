package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// outboxBroker is the in-memory driver with the SQS FIFO profile (order
// and head-of-line per key) without dedup or delivery limit, and messages
// of at most 4 KiB.
func outboxBroker(t testing.TB) idemtest.OutboxBroker {
	const maxSize = 4 << 10
	topic, subscribe, _, _ := memoryTopic(t, &memory.TopicConfig{Profile: memory.SQSFIFO, DedupWindow: -1, DeliveryLimit: -1, MaxMessageSize: maxSize})
	return idemtest.OutboxBroker{Topic: topic, Subscribe: subscribe, MaxMessageSize: maxSize}
}

var _ idemtest.Factory[pgx.Tx] = newDB

func TestOutbox(t *testing.T) {
	idemtest.RunOutbox(t, newDB, outboxBroker, idemtest.OutboxCaps{ConcurrentWriters: true})
}

// TestListenOutboxNotifies proves the NOTIFY half of the relay's wake-up on
// its own: a listener that is listening is called again when a transaction
// that added outbox rows commits, and not for one that rolled back.
func TestListenOutboxNotifies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, box, calls, stop := listening(ctx, t)
	if ok, err := pg.Driver().Impl().(idler).IdleOutbox(ctx, "t", time.Minute); !ok || err != nil { // a relay waits
		t.Fatalf("IdleOutbox: %v, %v", ok, err)
	}
	add := func(commit bool) {
		tx, err := idemtest.D(pg).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := box.Add(ctx, tx, &outbox.Message{AggregateID: "n", Type: "x", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = idemtest.D(pg).Commit(ctx, tx)
		} else {
			err = idemtest.D(pg).Rollback(ctx, tx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	add(false)
	add(true)
	select {
	case <-calls:
	case <-ctx.Done():
		t.Fatal("no notification after a committed Add")
	}
	if n := len(calls); n != 0 {
		t.Fatalf("%d extra notifications (a rolled-back Add must not notify)", n)
	}
	stop()
}

// listening opens a store in a schema of its own, with an outbox, and
// listens on it: calls receives one value per notification. stop ends the
// listener and checks it ended without an error.
func listening(ctx context.Context, t *testing.T) (*postgres.Store, *outbox.Outbox[pgx.Tx], chan struct{}, func()) {
	return listeningOn(ctx, t, newListenStore(ctx, t))
}

// listeningOn is listening on pg.
func listeningOn(ctx context.Context, t *testing.T, pg *postgres.Store) (*postgres.Store, *outbox.Outbox[pgx.Tx], chan struct{}, func()) {
	calls := make(chan struct{}, 16)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pg.Driver().Impl().(listener).ListenOutbox(lctx, func() { calls <- struct{}{} }) }()
	select {
	case <-calls: // listening
	case <-ctx.Done():
		t.Fatal("ListenOutbox did not start listening")
	}
	box, err := outbox.New[pgx.Tx](pg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pg, box, calls, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ListenOutbox: %v", err)
		}
	}
}

// newListenStore opens a store in a schema of its own, dropped at cleanup.
func newListenStore(ctx context.Context, t testing.TB) *postgres.Store {
	st, _ := newListenStoreSchema(ctx, t)
	return st
}

// newListenStoreSchema is newListenStore, and the store's schema.
func newListenStoreSchema(ctx context.Context, t testing.TB) (*postgres.Store, string) {
	pool := newPool(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "idem_listen_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return st, schema
}

// TestWakeFlag proves the producers' side of the wake-up: an adding
// transaction notifies only while the wake flag is set, and IdleOutbox does
// not set the flag while a transaction that read it unset may still
// commit, so that a relay going idle never sleeps through a row.
func TestWakeFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, box, calls, stop := listening(ctx, t)
	add := func() pgx.Tx {
		tx, err := idemtest.D(pg).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := box.Add(ctx, tx, &outbox.Message{AggregateID: "w", Type: "x", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	if err := pg.Driver().Impl().(idler).BusyOutbox(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	inFlight := add() // reads the flag unset: will not notify
	defer func() { _ = inFlight.Rollback(context.Background()) }()
	if ok, err := pg.Driver().Impl().(idler).IdleOutbox(ctx, "w", time.Minute); ok || err != nil {
		t.Fatalf("IdleOutbox with a non-notifying producer in flight: %v, %v; want false", ok, err)
	}
	if err := idemtest.D(pg).Commit(ctx, inFlight); err != nil {
		t.Fatal(err)
	}
	if ok, err := pg.Driver().Impl().(idler).IdleOutbox(ctx, "w", time.Minute); !ok || err != nil {
		t.Fatalf("IdleOutbox with no producer in flight: %v, %v; want true", ok, err)
	}
	// The flag is set now: the next adding transaction notifies (and the
	// one before did not, or this would not be the first call).
	if err := idemtest.D(pg).Commit(ctx, add()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calls:
	case <-ctx.Done():
		t.Fatal("no notification while the flag is set")
	}
	if err := pg.Driver().Impl().(idler).BusyOutbox(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if err := idemtest.D(pg).Commit(ctx, add()); err != nil {
		t.Fatal(err)
	}
	// A notification from the last commit would arrive before this one
	// (notifications are delivered in commit order).
	if err := idemtest.D(pg).Commit(ctx, func() pgx.Tx {
		tx, err := idemtest.D(pg).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "NOTIFY "+pgx.Identifier{postgres.OutboxChannel(pg)}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		return tx
	}()); err != nil {
		t.Fatal(err)
	}
	<-calls // the marker
	if n := len(calls); n != 0 {
		t.Fatalf("%d notifications while the flag was unset", n)
	}
	stop()
}
