package idem_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

func ExampleInbox_HandleBatch() {
	ctx := context.Background()
	store, topic, sub, cleanup := setup(ctx)
	defer cleanup()
	if _, err := store.DB().Exec(`CREATE TABLE invoices (order_id TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	inbox, err := idem.NewInbox(store, "billing", sub.Capabilities(), nil)
	if err != nil {
		log.Fatal(err)
	}
	invoice := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO invoices (order_id) VALUES (?)`, string(d.Message.Body))
		return err
	}
	// Three orders, one of them sent twice: one transaction claims the
	// batch, writes the three invoices and commits; then all four
	// deliveries are acknowledged.
	for _, id := range []string{"order-1", "order-2", "order-2", "order-3"} {
		_ = topic.Publish(ctx, &broker.Message{ID: id + "-placed", Body: []byte(id)})
	}
	ds, err := sub.Receive(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	results, err := inbox.HandleBatch(ctx, ds, invoice)
	if err != nil {
		log.Fatal(err)
	}
	var n int
	_ = store.DB().QueryRow(`SELECT count(*) FROM invoices`).Scan(&n)
	fmt.Printf("results: %v; invoices: %d\n", results, n)
	// Output:
	// results: [applied applied duplicate applied]; invoices: 3
}
