package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/idemtest"
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
	store := newListenStore(ctx, t)
	calls := make(chan struct{}, 16)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- store.ListenOutbox(lctx, func() { calls <- struct{}{} }) }()
	select {
	case <-calls: // listening
	case <-ctx.Done():
		t.Fatal("ListenOutbox did not start listening")
	}
	outbox, err := idem.NewOutbox[pgx.Tx](store, nil)
	if err != nil {
		t.Fatal(err)
	}
	add := func(commit bool) {
		tx, err := store.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := outbox.Add(ctx, tx, &idem.OutboxMessage{AggregateID: "n", Type: "x", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = store.Commit(ctx, tx)
		} else {
			err = store.Rollback(ctx, tx)
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
	if err := <-done; err != nil {
		t.Fatalf("ListenOutbox: %v", err)
	}
}

// newListenStore opens a store in a schema of its own, dropped at cleanup.
func newListenStore(ctx context.Context, t *testing.T) *postgres.Store {
	pool := newPool(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "idem_listen_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
