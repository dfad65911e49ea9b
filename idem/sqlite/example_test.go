package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
)

func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idem-sqlite")
	defer os.RemoveAll(dir)

	// Open creates the inbox and park tables (prefix "wary_") on first use.
	st, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), &sqlite.Options{Prefix: "shop_"})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	_, _ = st.DB().Exec(`CREATE TABLE shipments (order_id TEXT PRIMARY KEY)`)

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
