package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/outbox"
)

func Example_outbox() {
	ctx := context.Background()
	st, topic, sub, cleanup := setup(ctx)
	defer cleanup()
	if _, err := st.DB().Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, version INTEGER NOT NULL, status TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	box, err := outbox.New[*sql.Tx](st, nil)
	if err != nil {
		log.Fatal(err)
	}

	// The order and its event commit together, or not at all.
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, version, status) VALUES ('order-1', 1, 'placed')`); err != nil {
		log.Fatal(err)
	}
	seqs, err := box.Add(ctx, tx, &outbox.Message{
		ID: "order-1/placed", AggregateID: "order-1", Version: 1, Type: "order.placed", Payload: []byte(`{"total":42}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
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
	fmt.Println(m.ID, m.Key, m.Headers[idem.HeaderType], "version", m.Headers[idem.HeaderAggregateVersion], "sequence", m.Headers[idem.HeaderSequence])
	_ = ds[0].Ack(ctx)

	h, _ := relay.Health(ctx)
	fmt.Println("backlog:", h.Backlog, "quarantined:", h.Quarantined)
	// Output:
	// sequence: 1
	// published: 1 <nil>
	// order-1/placed order-1 order.placed version 1 sequence 1
	// backlog: 0 quarantined: 0
}

func Example_keys() {
	ctx := context.Background()
	st, _, _, cleanup := setup(ctx)
	defer cleanup()

	// The provider keeps keys for a day and replays the first result.
	payments, err := keys.New[*sql.Tx](st, keys.Contract{Provider: "payments", Retention: 24 * time.Hour, Replays: true}, nil)
	if err != nil {
		log.Fatal(err)
	}
	charges := 0
	charge := func(ctx context.Context, key string, intent []byte) ([]byte, error) {
		// Send key as the provider's Idempotency-Key header.
		charges++
		return []byte("ch_1"), nil
	}

	// Stage the payment in the transaction that decides it...
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := payments.Stage(ctx, tx, "payment:order-1:attempt-1", []byte(`{"amount":42}`)); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	// ...and call after the commit. A second Call (a retry, a duplicate
	// message) returns the stored outcome without calling.
	for range 2 {
		rec, err := payments.Call(ctx, "payment:order-1:attempt-1", charge)
		fmt.Println(rec.State, string(rec.Result), err)
	}
	fmt.Println("charges:", charges)
	// Output:
	// succeeded ch_1 <nil>
	// succeeded ch_1 <nil>
	// charges: 1
}
