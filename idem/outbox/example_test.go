package outbox_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/internal/pgexample"
)

// setup opens a PostgreSQL store in a schema of its own on the server at
// WARY_POSTGRES_URL, a memory broker topic and a subscription on it.
func setup(ctx context.Context) (*pgxpool.Pool, *postgres.Store, *broker.Topic, *broker.Subscription, func()) {
	// The store's tables and the example's own in a schema of their own
	// (New creates it), which the pool's connections search.
	schema := fmt.Sprintf("shop_%d_%d", os.Getpid(), schemas.Add(1))
	pool, drop := pgexample.Pool(ctx, schema)
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	b := memory.New(nil)
	_ = b.CreateTopic("orders", nil)
	_ = b.CreateSubscription("orders", "billing")
	topic, _ := b.OpenTopic("orders", nil)
	sub, _ := b.OpenSubscription("orders", "billing", nil)
	return pool, st, topic, sub, func() {
		sub.Close()
		topic.Close()
		b.Close()
		drop()
	}
}

var schemas atomic.Int32

// The order and its event commit together, or not at all; the relay
// publishes the committed row.
func ExampleOutbox_Add() {
	ctx := context.Background()
	pool, st, topic, sub, cleanup := setup(ctx)
	defer cleanup()
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, version INTEGER NOT NULL, status TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	box, err := outbox.New[pgx.Tx](st, nil)
	if err != nil {
		log.Fatal(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id, version, status) VALUES ('order-1', 1, 'placed')`); err != nil {
		log.Fatal(err)
	}
	seqs, err := box.Add(ctx, tx, &outbox.Message{
		ID: "order-1/placed", AggregateID: "order-1", Version: 1, Type: "order.placed", Payload: []byte(`{"total":42}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("sequence:", seqs[0])

	// The relay publishes committed rows (Run does it continuously).
	relay, err := outbox.NewRelay(st, topic, nil)
	if err != nil {
		log.Fatal(err)
	}
	n, err := relay.Drain(ctx)
	fmt.Println("published:", n, err)

	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	m := ds[0].Message
	fmt.Println(m.ID, m.Key, m.Headers.Get(idem.HeaderType), "version", m.Headers.Get(idem.HeaderAggregateVersion), "sequence", m.Headers.Get(idem.HeaderSequence))
	_ = ds[0].Ack(ctx)

	h, _ := relay.Health(ctx)
	fmt.Println("backlog:", h.Backlog, "quarantined:", h.Quarantined)
	// Output:
	// sequence: 1
	// published: 1 <nil>
	// order-1/placed order-1 order.placed version 1 sequence 1
	// backlog: 0 quarantined: 0
}

// A relay runs beside the producer until the program stops; Wake, after
// a commit in the same process, makes it publish without waiting for its
// next poll.
func ExampleRelay_Run() {
	ctx := context.Background()
	pool, st, topic, sub, cleanup := setup(ctx)
	defer cleanup()
	box, err := outbox.New[pgx.Tx](st, nil)
	if err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(st, topic, &outbox.RelayOptions{
		Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)},
	})
	if err != nil {
		log.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := box.Add(ctx, tx, &outbox.Message{ID: "order-1/placed", AggregateID: "order-1", Version: 1, Type: "order.placed"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	relay.Wake()

	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("received:", ds[0].Message.ID)
	_ = ds[0].Ack(ctx)
	// Stopping: Run settles what it holds and returns nil.
	stop()
	fmt.Println("relay stopped:", <-done)
	// Output:
	// received: order-1/placed
	// relay stopped: <nil>
}

// OrderPlaced is an event's body.
type OrderPlaced struct {
	Order string `json:"order"`
	Total int    `json:"total"`
}

// NewMessage encodes the event (JSON, with nil) and records the codec's
// content type, which the relay publishes and the consumer's typed
// decoding (broker.Decode, broker.Typed, idem.Typed) checks.
func ExampleNewMessage() {
	ctx := context.Background()
	pool, st, topic, sub, cleanup := setup(ctx)
	defer cleanup()

	// The producer: the event, typed, in the transaction of the order.
	box, err := outbox.New[pgx.Tx](st, nil)
	if err != nil {
		log.Fatal(err)
	}
	m, err := outbox.NewMessage(nil, "order-1/placed", "order-1", 1, "order.placed", OrderPlaced{Order: "order-1", Total: 42})
	if err != nil {
		log.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := box.Add(ctx, tx, m); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(st, topic, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := relay.Drain(ctx); err != nil {
		log.Fatal(err)
	}

	// The consumer: the same codec decodes it; another refuses it.
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ds[0].Message.Headers.Get(broker.HeaderContentType))
	placed, err := broker.Decode[OrderPlaced](nil, ds[0])
	fmt.Printf("%+v %v\n", placed, err)
	_, err = broker.Decode[OrderPlaced](protobuf{}, ds[0])
	fmt.Println(err)
	_ = ds[0].Ack(ctx)
	// Output:
	// application/json
	// {Order:order-1 Total:42} <nil>
	// permanent: wary: undecodable message: message "order-1/placed" is "application/json", not application/x-protobuf
}

// protobuf stands for a codec of another encoding.
type protobuf struct{}

func (protobuf) ContentType() string                { return "application/x-protobuf" }
func (protobuf) Marshal(v any) ([]byte, error)      { return nil, fmt.Errorf("not implemented") }
func (protobuf) Unmarshal(data []byte, v any) error { return fmt.Errorf("not implemented") }
