package postgres_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/postgres"
)

// A consumer that records payments exactly once per message, running the
// subscription's handler loop with eight handlers at once. (Not run as a
// test: it needs a server.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("WARY_POSTGRES_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: "billing"})
	if err != nil {
		log.Fatal(err)
	}

	sub, err := memory.Default().OpenSubscription("payments", "ledger", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	inbox, err := idem.NewInbox(st, "ledger", sub.Capabilities(), nil)
	if err != nil {
		log.Fatal(err)
	}
	record := func(ctx context.Context, tx pgx.Tx, d *broker.Delivery) error {
		_, err := tx.Exec(ctx, `INSERT INTO payments (message_id, body) VALUES ($1, $2)`, d.Message.ID, d.Message.Body)
		return err
	}
	// The inbox purges records past the retention by itself as it handles
	// deliveries (Options.PurgeInterval).
	if err := sub.Run(ctx, inbox.Wrap(record), &broker.RunOptions{Concurrency: 8}); err != nil {
		log.Fatal(err)
	}
}
