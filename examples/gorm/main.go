// Command gorm consumes order events through the inbox of package idem on
// PostgreSQL through database/sql, and writes each order with GORM in the
// transaction in which the inbox claimed the delivery
// (postgres.OpenDB on the *sql.DB under GORM: the handler gets the
// *sql.Tx, and a GORM session on it writes there). It prints what happened
// to each delivery:
//
//   - a redelivered copy of an event (same message ID) is a duplicate: the
//     inbox acknowledges it without running the handler, and the order is
//     written once;
//   - a handler that fails after GORM wrote its row rolls back the row and
//     the inbox's claim together: the redelivery runs the handler again,
//     and the order is written once.
//
// The tables go to a schema of their own, dropped at the end. It exits
// with status 1 when the final state is not the expected one.
//
//	go -C examples run ./gorm -postgres 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	gormpg "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/postgres"
)

func main() {
	url := flag.String("postgres", envOr("WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *url, "wary_gorm_example"); err != nil {
		log.Fatal(err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Order is the domain row, written by GORM.
type Order struct {
	ID       string `gorm:"primaryKey"`
	Customer string
	Amount   int
}

// inTx is a GORM session on tx, the inbox's transaction: every statement
// of the session runs in it.
func inTx(ctx context.Context, db *gorm.DB, tx *sql.Tx) *gorm.DB {
	s := db.Session(&gorm.Session{Context: ctx, NewDB: true, SkipDefaultTransaction: true})
	s.Statement.ConnPool = tx
	return s
}

// app is the example's database: a *sql.DB of pgx's driver whose
// search_path is schema, GORM on it, and the store on it.
type app struct {
	sqlDB  *sql.DB
	db     *gorm.DB
	store  *postgres.SQLStore
	schema string
}

// open creates schema in the database at url, and opens GORM (with the
// orders table) and the store on it.
func open(ctx context.Context, url, schema string) (*app, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["search_path"] = schema
	a := &app{sqlDB: stdlib.OpenDB(*cfg), schema: schema} // or sql.Open("pgx", url); GORM's own *sql.DB (db.DB()) is pgx's too
	if _, err := a.sqlDB.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return nil, errors.Join(err, a.sqlDB.Close())
	}
	if a.db, err = gorm.Open(gormpg.New(gormpg.Config{Conn: a.sqlDB}), &gorm.Config{Logger: logger.Discard}); err == nil {
		err = a.db.WithContext(ctx).AutoMigrate(&Order{})
	}
	if err == nil {
		// The store on the same *sql.DB: its transactions are *sql.Tx.
		a.store, err = postgres.OpenDB(ctx, a.sqlDB, nil)
	}
	if err != nil {
		return nil, errors.Join(err, a.close(ctx))
	}
	return a, nil
}

// close drops the schema and closes the database.
func (a *app) close(ctx context.Context) error {
	_, err := a.sqlDB.ExecContext(context.WithoutCancel(ctx), "DROP SCHEMA "+pgx.Identifier{a.schema}.Sanitize()+" CASCADE")
	return errors.Join(err, a.sqlDB.Close())
}

// queue creates and opens the memory broker's topic "orders" and its
// subscription "billing".
func queue(b *memory.Broker) (*broker.Topic, *broker.Subscription, error) {
	if err := errors.Join(b.CreateTopic("orders", nil), b.CreateSubscription("orders", "billing")); err != nil {
		return nil, nil, err
	}
	topic, err := b.OpenTopic("orders", nil)
	if err != nil {
		return nil, nil, err
	}
	sub, err := b.OpenSubscription("orders", "billing", nil)
	if err != nil {
		return nil, nil, errors.Join(err, topic.Close())
	}
	return topic, sub, nil
}

// run consumes the demo's events with the tables in schema (created, and
// dropped at the end) of the database at url.
func run(ctx context.Context, w io.Writer, url, schema string) (err error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	a, err := open(ctx, url, schema)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, a.close(ctx)) }()
	db, store := a.db, a.store

	b := memory.New(nil)
	defer b.Close()
	topic, sub, err := queue(b)
	if err != nil {
		return err
	}
	defer topic.Close()
	defer sub.Close()
	inbox, err := idem.NewInbox(store, "billing", sub.Capabilities(), &idem.Options{
		Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)},
	})
	if err != nil {
		return err
	}

	// apply writes the order with GORM in the inbox's transaction. The
	// first attempt at order-2 fails after the row was written: the
	// payment service is down, say.
	apply := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		var o Order
		if err := json.Unmarshal(d.Message.Body, &o); err != nil {
			return broker.Permanent(err)
		}
		if err := inTx(ctx, db, tx).Create(&o).Error; err != nil {
			return err
		}
		if o.ID == "order-2" && d.Attempt == 1 {
			return errors.New("payment service unavailable")
		}
		return nil
	}

	deliver := func(m *broker.Message) error {
		if err := topic.Publish(ctx, m); err != nil {
			return err
		}
		for {
			ds, err := sub.Receive(ctx, 1)
			if err != nil {
				return err
			}
			d := ds[0]
			r, herr := inbox.Handle(ctx, d, apply)
			var n int64
			if err := db.WithContext(ctx).Model(&Order{}).Where("id = ?", d.Message.Key).Count(&n).Error; err != nil {
				return err
			}
			fmt.Fprintf(w, "%-8s attempt %d: %s", d.Message.ID, d.Attempt, r)
			if herr != nil {
				fmt.Fprintf(w, " (%v)", herr)
			}
			fmt.Fprintf(w, "; rows of %s: %d\n", d.Message.Key, n)
			if r != idem.ResultFailed {
				return nil
			}
		}
	}
	order := func(id, customer string, amount int) *broker.Message {
		body, _ := json.Marshal(Order{ID: id, Customer: customer, Amount: amount})
		return &broker.Message{ID: "evt-" + id, Key: id, Body: body}
	}
	for _, m := range []*broker.Message{
		order("order-1", "ada", 30),
		order("order-1", "ada", 30), // the same event again: a redelivery
		order("order-2", "bob", 12), // fails once, after GORM wrote the row
	} {
		if err := deliver(m); err != nil {
			return err
		}
	}

	var orders []Order
	if err := db.WithContext(ctx).Order("id").Find(&orders).Error; err != nil {
		return err
	}
	for _, o := range orders {
		fmt.Fprintf(w, "order    %s: %s, %d\n", o.ID, o.Customer, o.Amount)
	}
	s := inbox.Stats()
	fmt.Fprintf(w, "stats    processed %d, duplicates %d, failed %d\n", s.Processed, s.Duplicates, s.Failed)
	if len(orders) != 2 || s.Processed != 2 || s.Duplicates != 1 {
		return fmt.Errorf("%d orders, %d processed, %d duplicates; want 2, 2 and 1", len(orders), s.Processed, s.Duplicates)
	}
	return nil
}
