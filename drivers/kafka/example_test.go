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
	// The client is the program's: it closes it after the topics on it.
	cl, err := kgo.NewClient(append(kafka.TopicOpts(), kgo.SeedBrokers("localhost:9092"))...)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	orders, err := kafka.OpenTopic(ctx, cl, "orders", nil)
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
	// A consumer group's settings and callbacks are fixed when kgo builds
	// the client: SubscriptionOpts gives them, the program's options follow.
	cl, err := kgo.NewClient(append(kafka.SubscriptionOpts("billing"), kgo.SeedBrokers("localhost:9092"))...)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	sub, err := kafka.OpenSubscription(ctx, cl, "orders", "billing",
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
