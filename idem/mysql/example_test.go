package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/mysql"
)

func ExampleOpen() {
	ctx := context.Background()
	// A database of the example's own on the server of WARY_MYSQL_URL
	// ("root@tcp(127.0.0.1:3306)/test"), dropped at the end.
	cfg, err := gomysql.ParseDSN(os.Getenv("WARY_MYSQL_URL"))
	if err != nil {
		log.Fatal(err)
	}
	server, _ := sql.Open("mysql", cfg.FormatDSN())
	defer server.Close()
	_, _ = server.Exec("DROP DATABASE IF EXISTS wary_example")
	if _, err := server.Exec("CREATE DATABASE wary_example"); err != nil {
		log.Fatal(err)
	}
	defer server.Exec("DROP DATABASE wary_example")
	cfg.DBName = "wary_example"
	// Open creates the inbox and park tables (prefix "shop_") on first use.
	// Its transactions run on a pool of its own, READ COMMITTED with
	// autocommit off: beginning one sends nothing.
	st, err := mysql.Open(ctx, cfg.FormatDSN(), &mysql.Options{Prefix: "shop_"})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	_, _ = st.DB().Exec(`CREATE TABLE shipments (order_id VARCHAR(64) PRIMARY KEY)`)

	b := memory.New(nil)
	_ = b.CreateTopic("orders", nil)
	_ = b.CreateSubscription("orders", "shipping")
	topic, _ := b.OpenTopic("orders", nil)
	defer topic.Close()
	sub, _ := b.OpenSubscription("orders", "shipping", nil)
	defer sub.Close()

	inbox, err := idem.NewInbox(st, "shipping", sub.Capabilities(), nil)
	if err != nil {
		log.Fatal(err)
	}
	// The handler writes through the transaction that claimed the message.
	ship := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO shipments (order_id) VALUES (?)`, string(d.Message.Body))
		return err
	}
	_ = topic.Publish(ctx, &broker.Message{ID: "evt-1", Body: []byte("order-1")}, &broker.Message{ID: "evt-1", Body: []byte("order-1")})

	// Run the subscription until both copies are settled; a production
	// consumer passes inbox.Wrap(ship) to Run and runs until shut down.
	ctx, cancel := context.WithCancel(ctx)
	results := make(chan idem.Result, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
			r, err := inbox.Handle(ctx, d, ship)
			results <- r
			return err
		}, nil)
	}()
	fmt.Println(<-results, <-results)
	cancel()
	<-done
	var n int
	_ = st.DB().QueryRow(`SELECT count(*) FROM shipments`).Scan(&n)
	fmt.Println("shipments:", n)
	// Output:
	// applied duplicate
	// shipments: 1
}
