package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/postgres"
)

// A consumer that records payments once per message, running the
// subscription's handler loop with eight handlers at once. A producer
// retry sends the payment twice; the example stops once both copies are
// settled (a consumer runs until it shuts down). It needs the server at
// WARY_POSTGRES_URL.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("WARY_POSTGRES_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// The store's tables, and the example's own, in a schema of their own
	// (New creates it).
	schema := fmt.Sprintf("billing_%d", os.Getpid())
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	if _, err := pool.Exec(ctx, "CREATE TABLE "+schema+".payments (message_id text PRIMARY KEY, body bytea NOT NULL)"); err != nil {
		log.Fatal(err)
	}

	b := memory.New(nil)
	defer b.Close()
	_ = b.CreateTopic("payments", nil)
	_ = b.CreateSubscription("payments", "ledger")
	topic, _ := b.OpenTopic("payments", nil)
	defer topic.Close()
	sub, err := b.OpenSubscription("payments", "ledger", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	inbox, err := idem.NewInbox(st, "ledger", sub.Capabilities(), nil)
	if err != nil {
		log.Fatal(err)
	}
	// The handler writes through the transaction that claims the message.
	record := func(ctx context.Context, tx pgx.Tx, d *broker.Delivery) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+schema+".payments (message_id, body) VALUES ($1, $2)", d.Message.ID, d.Message.Body)
		return err
	}
	msg := &broker.Message{ID: "payment-1", Body: []byte(`{"amount":42}`)}
	_ = topic.Publish(ctx, msg, msg)

	// The inbox purges records past the retention by itself as it handles
	// deliveries (Options.PurgeInterval).
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var settled atomic.Int32
	handle := inbox.Wrap(record)
	err = sub.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
		err := handle(ctx, d)
		if settled.Add(1) == 2 {
			stop()
		}
		return err
	}, &broker.RunOptions{Concurrency: 8})
	if err != nil {
		log.Fatal(err)
	}
	var n int
	_ = pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".payments").Scan(&n)
	fmt.Println("payments:", n, "duplicates:", inbox.Stats().Duplicates)
	// Output:
	// payments: 1 duplicates: 1
}
