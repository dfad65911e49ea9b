package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"sync/atomic"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

func Example_inboxBatch() {
	ctx := context.Background()
	st, topic, sub, cleanup := setup(ctx)
	defer cleanup()
	if _, err := st.DB().Exec(`CREATE TABLE invoices (order_id TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	// Up to 8 deliveries per transaction: the Handle calls that arrive
	// while a transaction is in flight wait, and the next transaction
	// claims them with one statement, commits once and acknowledges them
	// with one driver call. The handler is the same as without Batch.
	inbox, err := idem.NewInbox(st, "billing", sub.Capabilities(), &idem.Options{Batch: 8})
	if err != nil {
		log.Fatal(err)
	}
	invoice := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO invoices (order_id) VALUES (?)`, string(d.Message.Body))
		return err
	}

	// Three orders, one of them sent twice.
	for _, id := range []string{"order-1", "order-2", "order-2", "order-3"} {
		_ = topic.Publish(ctx, &broker.Message{ID: id + "-placed", Body: []byte(id)})
	}
	// Run's concurrent handlers fill the transactions: Concurrency at
	// least Batch. (The example stops once the four deliveries are
	// settled; a consumer runs until it shuts down.)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var settled atomic.Int32
	handle := inbox.Wrap(invoice)
	err = sub.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
		err := handle(ctx, d)
		if settled.Add(1) == 4 {
			stop()
		}
		return err
	}, &broker.RunOptions{Concurrency: 8})
	if err != nil {
		log.Fatal(err)
	}
	var n int
	_ = st.DB().QueryRow(`SELECT count(*) FROM invoices`).Scan(&n)
	s := inbox.Stats()
	fmt.Printf("invoices: %d; processed %d, duplicates %d\n", n, s.Processed, s.Duplicates)
	// Output:
	// invoices: 3; processed 3, duplicates 1
}
