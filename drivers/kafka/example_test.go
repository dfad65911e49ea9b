package kafka_test

import (
	"context"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

func ExampleOpenTopic() {
	ctx := context.Background()
	orders, err := kafka.OpenTopic(ctx, []kgo.Opt{kgo.SeedBrokers("localhost:9092")}, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer orders.Close()
	err = orders.Publish(ctx, &broker.Message{ID: "order-42", Key: "customer-7", Body: []byte(`{"total":12}`)})
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleOpenSubscription() {
	ctx := context.Background()
	sub, err := kafka.OpenSubscription(ctx, []kgo.Opt{kgo.SeedBrokers("localhost:9092")}, "orders", "billing",
		&kafka.SubscriptionOptions{Ordered: true, DeadLetterTopic: "orders.dlq", DeliveryLimit: 5})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	err = sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
		fmt.Printf("%s (attempt %d): %s\n", d.Message.ID, d.Attempt, d.Message.Body)
		return nil // the loop acks
	}, &broker.RunOptions{Concurrency: 8})
	if err != nil {
		log.Fatal(err)
	}
}

func Example_url() {
	sub, err := broker.OpenSubscription(context.Background(),
		"kafka://billing?topic=orders&brokers=localhost:9092&ordered=true&dead_letter_topic=orders.dlq&delivery_limit=5")
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
}
