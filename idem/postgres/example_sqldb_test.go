package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"

	_ "github.com/jackc/pgx/v5/stdlib" // registers pgx's database/sql driver, "pgx"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/postgres"
)

// The store through database/sql: the handler gets the *sql.Tx in which
// the inbox claimed the message, for database/sql code or an ORM on the
// same *sql.DB (examples/gorm does it with GORM). A producer retry sends
// the payment twice; it is recorded once. It needs the server at
// WARY_POSTGRES_URL.
func ExampleOpenDB() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("WARY_POSTGRES_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	schema := fmt.Sprintf("billing_sql_%d", os.Getpid())
	st, err := postgres.OpenDB(ctx, db, &postgres.Options{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	defer db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE")
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+schema+".payments (message_id text PRIMARY KEY, body bytea NOT NULL)"); err != nil {
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
	record := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO "+schema+".payments (message_id, body) VALUES ($1, $2)", d.Message.ID, d.Message.Body)
		return err
	}
	msg := &broker.Message{ID: "payment-1", Body: []byte(`{"amount":42}`)}
	_ = topic.Publish(ctx, msg, msg)
	for range 2 {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		r, err := inbox.Handle(ctx, ds[0], record)
		fmt.Println(r, err)
	}
	var n int
	_ = db.QueryRowContext(ctx, "SELECT count(*) FROM "+schema+".payments").Scan(&n)
	fmt.Println("payments:", n)
	// Output:
	// applied <nil>
	// duplicate <nil>
	// payments: 1
}
