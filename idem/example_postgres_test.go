package idem_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/internal/pgexample"
)

// A consumer's effect and the claim of its message commit together: a
// copy of the message (a producer's retry, a redelivery) is acknowledged
// as a duplicate and not applied again. It runs on the PostgreSQL server
// at WARY_POSTGRES_URL; idem/sqlite's examples show the same on SQLite.
func ExampleInbox_Handle() {
	ctx := context.Background()
	schema := fmt.Sprintf("billing_%d", os.Getpid())
	pool, drop := pgexample.Pool(ctx, schema) // searches schema
	defer drop()
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE invoices (order_id text NOT NULL, amount int NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	b := memory.New(nil)
	defer b.Close()
	_ = b.CreateTopic("orders", nil)
	_ = b.CreateSubscription("orders", "billing")
	topic, _ := b.OpenTopic("orders", nil)
	sub, _ := b.OpenSubscription("orders", "billing", nil)

	inbox, err := idem.NewInbox(st, "billing", sub.Capabilities(), nil)
	if err != nil {
		log.Fatal(err)
	}
	// The handler writes through the transaction that claims the message.
	invoice := func(ctx context.Context, tx pgx.Tx, d *broker.Delivery) error {
		_, err := tx.Exec(ctx, `INSERT INTO invoices (order_id, amount) VALUES ($1, 100)`, string(d.Message.Body))
		return err
	}

	// A producer retry publishes the same message twice.
	msg := &broker.Message{ID: "order-1-placed", Body: []byte("order-1")}
	_ = topic.Publish(ctx, msg, msg)
	for range 2 {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		r, err := inbox.Handle(ctx, ds[0], invoice)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ds[0].Message.ID, r)
	}
	var n int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM invoices`).Scan(&n)
	fmt.Println("invoices:", n)
	// Output:
	// order-1-placed applied
	// order-1-placed duplicate
	// invoices: 1
}
