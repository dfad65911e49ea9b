package nats_test

import (
	"context"
	"log"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/nats"
)

// Publish to a stream and consume its durable pull consumer, the
// connection the caller's.
func Example() {
	ctx := context.Background()
	nc, err := natsgo.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	// The stream ORDERS (subjects orders and orders.>), its dead-letter
	// stream and the consumer billing, unless they exist.
	if err := nats.Declare(ctx, js, nats.Spec{Stream: "ORDERS", Subject: "orders", Consumer: "billing"}); err != nil {
		log.Fatal(err)
	}
	orders, err := nats.OpenTopic(ctx, js, "ORDERS", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer orders.Close()
	// Published to orders.customer-7, deduplicated by its ID.
	if err := orders.Publish(ctx, &broker.Message{ID: "order-1/placed", Key: "customer-7", Body: []byte(`{"total":42}`)}); err != nil {
		log.Fatal(err)
	}
	sub, err := nats.OpenSubscription(ctx, js, "ORDERS", "billing", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	log.Println(sub.Capabilities()) // read from the stream and the consumer
	err = sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
		log.Printf("%s (key %s, attempt %d)", d.Message.ID, d.Message.Key, d.Attempt)
		return nil // acked; an error nacks, and the delivery limit dead-letters
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
}
