package rabbit_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/rabbit"
)

func Example() {
	ctx := context.Background()
	conn, err := rabbit.Dial(ctx, os.Getenv("WARY_RABBIT_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	// An exchange and a quorum queue with a single active consumer, a
	// delivery limit of 5 and a dead-letter queue.
	top := rabbit.Topology{Exchange: "orders", Queue: "orders", DeliveryLimit: 5, DeadLetter: true}
	if err := rabbit.Declare(ctx, conn, top); err != nil {
		log.Fatal(err)
	}
	topic, err := rabbit.OpenTopic(ctx, conn, top, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer topic.Close()
	// Returns once RabbitMQ confirmed the message.
	if err := topic.Publish(ctx, &broker.Message{Key: "customer-42", Body: []byte(`{"total":12}`)}); err != nil {
		log.Fatal(err)
	}

	sub, err := rabbit.OpenSubscription(ctx, conn, top, &rabbit.SubscriptionOptions{NackDelay: true})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	// Concurrency is set here only: Run raises the consumer's prefetch
	// (basic.qos) to 2×8 to keep 8 handlers busy.
	err = sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
		fmt.Printf("%s (attempt %d): %s\n", d.Message.Key, d.Attempt, d.Message.Body)
		return nil // ack
	}, &broker.RunOptions{Concurrency: 8})
	if err != nil {
		log.Fatal(err)
	}
}

func Example_partitioned() {
	ctx := context.Background()
	conn, err := rabbit.Dial(ctx, os.Getenv("WARY_RABBIT_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	// Order per key across consumers: 8 queues, each with its own single
	// active consumer; the key's hash picks the queue.
	top := rabbit.Topology{Exchange: "payments", Queue: "payments", Partitions: 8, DeadLetter: true}
	if err := rabbit.Declare(ctx, conn, top); err != nil {
		log.Fatal(err)
	}
	topic, err := rabbit.OpenTopic(ctx, conn, top, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer topic.Close()
	fmt.Println(topic.Capabilities().OrderingKey)
}

func ExampleOpenDeadLetters() {
	ctx := context.Background()
	conn, err := rabbit.Dial(ctx, os.Getenv("WARY_RABBIT_URL"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	top := rabbit.Topology{Exchange: "orders", Queue: "orders", DeadLetter: true}
	// The dead-letter queue has no delivery limit (on RabbitMQ 4.x too).
	dlq, err := rabbit.OpenDeadLetters(ctx, conn, top, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer dlq.Close()
	ds, err := dlq.Receive(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ds {
		fmt.Println(d.Message.ID, d.Message.Headers.Get(driver.HeaderDeadLetterReason))
		_ = d.Ack(ctx)
	}
}

func ExampleOpenTopic() {
	ctx := context.Background()
	conn, err := rabbit.Dial(ctx, os.Getenv("WARY_RABBIT_URL"), nil)
	if err != nil {
		log.Fatal(err) // a refused login matches broker.ErrPermission
	}
	defer conn.Close()

	// The portable options are embedded, as in every driver's options.
	topic, err := rabbit.OpenTopic(ctx, conn, rabbit.Topology{Exchange: "audit"}, &rabbit.TopicOptions{
		TopicOptions: broker.TopicOptions{Telemetry: broker.Telemetry{Logger: slog.Default()}},
		RoutingKey:   "audit",
		SkipCheck:    true, // the exchange is declared elsewhere
	})
	if err != nil {
		log.Fatal(err)
	}
	defer topic.Close()
	fmt.Println(topic.Capabilities().MaxMessageSize)
}

func ExampleURLOpener() {
	ctx := context.Background()
	// The server URL, the exchange as a parameter; the password never
	// appears in errors or logs.
	topic, err := broker.OpenTopic(ctx, "amqp://guest:guest@127.0.0.1:5672/?exchange=orders&partitions=8")
	if err != nil {
		log.Fatal(err)
	}
	defer topic.Close()
}
