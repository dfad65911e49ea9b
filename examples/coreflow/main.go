// Command coreflow is the README's program: an order and its event commit
// in one transaction (outbox), a relay publishes the event, and a consumer
// applies it once through its inbox, behind a version check.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/wary-go/wary/broker"
	_ "github.com/wary-go/wary/drivers/memory" // mem:// URLs
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer) error {
	dir, err := os.MkdirTemp("", "wary-coreflow")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), nil) // or postgres.New
	if err != nil {
		return err
	}
	defer store.Close()
	db := store.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER);
		CREATE TABLE invoices (order_id TEXT PRIMARY KEY, version INTEGER, total INTEGER)`); err != nil {
		return err
	}

	// 1. Producer: the order and its event commit together, or not at all.
	box, err := outbox.New(store, nil)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders VALUES ('order-1', 42)`); err != nil {
		return err
	}
	placed, err := outbox.NewMessage(nil, "order-1/placed", "order-1", 1, "order.placed", 42) // the total, in JSON
	if err != nil {
		return err
	}
	if _, err := box.Add(ctx, tx, placed); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}

	// 2. Relay: publishes committed rows, the aggregate ID as the key
	// (a service runs relay.Run(ctx) instead of Drain).
	topic, err := broker.OpenTopic(ctx, "mem://orders")
	if err != nil {
		return err
	}
	defer topic.Close()
	sub, err := broker.OpenSubscription(ctx, "mem://orders/billing")
	if err != nil {
		return err
	}
	defer sub.Close()
	relay, err := outbox.NewRelay(store, topic, nil)
	if err != nil {
		return err
	}
	n, err := relay.Drain(ctx)
	fmt.Fprintln(out, "relay published", n, err)

	// 3. Consumer: the inbox claims the message ID and checks the event's
	// version against invoices, in the transaction the handler writes in;
	// the body decodes with the producer's codec (a body that does not is
	// dead-lettered with the reason).
	inbox, err := idem.NewInbox(store, "billing", sub.Capabilities(), &idem.Options{
		Versions: idem.VersionTable{Table: "invoices", IDColumn: "order_id", VersionColumn: "version"}})
	if err != nil {
		return err
	}
	bill := idem.Typed(nil, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery, total int) error {
		ev, err := idem.ParseEvent(d.Message)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO invoices VALUES (?, ?, ?)`, ev.AggregateID, ev.Version, total)
		return err
	})
	// A service runs sub.Run(ctx, inbox.Wrap(bill), nil). Here: the
	// delivery, then a copy with the same ID (a relay that died before
	// marking its row sent publishes it again).
	for i := range 2 {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			return err
		}
		r, err := inbox.Handle(ctx, ds[0], bill)
		fmt.Fprintln(out, ds[0].Message.ID, "version", ds[0].Message.Headers.Get(idem.HeaderAggregateVersion), r, err)
		if i == 0 {
			if err := topic.Publish(ctx, ds[0].Message); err != nil {
				return err
			}
		}
	}
	var invoices int
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM invoices`).Scan(&invoices)
	fmt.Fprintln(out, "invoices", invoices)
	return err
}
