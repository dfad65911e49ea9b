package failpoint_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
)

// The relay dies after publishing a row and before marking it sent: the
// row stays in the outbox, and the next relay publishes it again (an inbox
// drops the copy).
func ExampleWithAfterPublish() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "failpoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	b := memory.New(nil)
	defer b.Close()
	if err := b.CreateTopic("orders", nil); err != nil {
		log.Fatal(err)
	}
	topic, err := b.OpenTopic("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	box, err := outbox.New[*sql.Tx](st, nil)
	if err != nil {
		log.Fatal(err)
	}
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := box.Add(ctx, tx, &outbox.Message{ID: "order-1/placed", AggregateID: "order-1", Version: 1, Type: "order.placed", Payload: []byte(`{}`)}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	published := 0
	killed := errors.New("relay killed")
	crash := failpoint.WithAfterPublish(ctx, func(m *broker.Message) error {
		published++
		return killed
	})
	relay, err := outbox.NewRelay(st, topic, nil)
	if err != nil {
		log.Fatal(err)
	}
	_, err = relay.Drain(crash)
	fmt.Println("first relay:", errors.Is(err, killed), "published", published, "marked", relay.Stats().Published)

	n, err := relay.Drain(ctx)
	fmt.Println("next relay published again:", n, err)
	// Output:
	// first relay: true published 1 marked 0
	// next relay published again: 1 <nil>
}
