package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"strings"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
)

// billing sets up the examples below: a billing inbox with an invoices
// table, and the deliveries of three orders, one of them sent twice.
func billing(ctx context.Context) (*idem.Inbox[*sql.Tx], *sqlite.Store, []*broker.Delivery, func()) {
	st, topic, sub, cleanup := setup(ctx)
	if _, err := st.DB().Exec(`CREATE TABLE invoices (order_id TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	inbox, err := idem.NewInbox(st, "billing", sub.Capabilities(), nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"order-1", "order-2", "order-2", "order-3"} {
		_ = topic.Publish(ctx, &broker.Message{ID: id + "-placed", Body: []byte(id)})
	}
	ds, err := sub.Receive(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	return inbox, st, ds, cleanup
}

func Example_inboxHandleBatch() {
	ctx := context.Background()
	inbox, st, ds, cleanup := billing(ctx)
	defer cleanup()
	invoice := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO invoices (order_id) VALUES (?)`, string(d.Message.Body))
		return err
	}
	// Three orders, one of them sent twice: one transaction claims the
	// batch, writes the three invoices and commits; then all four
	// deliveries are acknowledged.
	results, err := inbox.HandleBatch(ctx, ds, invoice)
	if err != nil {
		log.Fatal(err)
	}
	var n int
	_ = st.DB().QueryRow(`SELECT count(*) FROM invoices`).Scan(&n)
	fmt.Printf("results: %v; invoices: %d\n", results, n)
	// Output:
	// results: [applied applied duplicate applied]; invoices: 3
}

func Example_inboxHandleBatchAll() {
	ctx := context.Background()
	inbox, st, ds, cleanup := billing(ctx)
	defer cleanup()
	// The batch handler gets the deliveries to apply, the duplicate left
	// out, and writes them with one statement.
	invoices := func(ctx context.Context, tx *sql.Tx, ds []*broker.Delivery) error {
		q := `INSERT INTO invoices (order_id) VALUES ` + strings.Repeat(`(?), `, len(ds)-1) + `(?)`
		args := make([]any, len(ds))
		for i, d := range ds {
			args[i] = string(d.Message.Body)
		}
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}
	results, err := inbox.HandleBatchAll(ctx, ds, invoices)
	if err != nil {
		log.Fatal(err)
	}
	var n int
	_ = st.DB().QueryRow(`SELECT count(*) FROM invoices`).Scan(&n)
	fmt.Printf("results: %v; invoices: %d\n", results, n)
	// Output:
	// results: [applied applied duplicate applied]; invoices: 3
}
