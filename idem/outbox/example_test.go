package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
)

// OrderPlaced is an event's body.
type OrderPlaced struct {
	Order string `json:"order"`
	Total int    `json:"total"`
}

// NewMessage encodes the event (JSON, with nil) and records the codec's
// content type, which the relay publishes and the consumer's typed
// decoding (broker.Decode, broker.Typed, idem.Typed) checks.
func ExampleNewMessage() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	b := memory.New(nil)
	defer b.Close()
	_ = b.CreateTopic("orders", nil)
	_ = b.CreateSubscription("orders", "billing")
	topic, _ := b.OpenTopic("orders", nil)
	defer topic.Close()
	sub, _ := b.OpenSubscription("orders", "billing", nil)
	defer sub.Close()

	// The producer: the event, typed, in the transaction of the order.
	box, err := outbox.New[*sql.Tx](st, nil)
	if err != nil {
		log.Fatal(err)
	}
	m, err := outbox.NewMessage(nil, "order-1/placed", "order-1", 1, "order.placed", OrderPlaced{Order: "order-1", Total: 42})
	if err != nil {
		log.Fatal(err)
	}
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := box.Add(ctx, tx, m); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(st, topic, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := relay.Drain(ctx); err != nil {
		log.Fatal(err)
	}

	// The consumer: the same codec decodes it; another refuses it.
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ds[0].Message.Headers[broker.HeaderContentType])
	placed, err := broker.Decode[OrderPlaced](nil, ds[0])
	fmt.Printf("%+v %v\n", placed, err)
	_, err = broker.Decode[OrderPlaced](protobuf{}, ds[0])
	fmt.Println(err)
	_ = ds[0].Ack(ctx)
	// Output:
	// application/json
	// {Order:order-1 Total:42} <nil>
	// permanent: wary: undecodable message: message "order-1/placed" is "application/json", not application/x-protobuf
}

// protobuf stands for a codec of another encoding.
type protobuf struct{}

func (protobuf) ContentType() string                { return "application/x-protobuf" }
func (protobuf) Marshal(v any) ([]byte, error)      { return nil, fmt.Errorf("not implemented") }
func (protobuf) Unmarshal(data []byte, v any) error { return fmt.Errorf("not implemented") }
