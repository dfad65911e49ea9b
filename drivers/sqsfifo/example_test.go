package sqsfifo_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/sqsfifo"
)

// Publish to a FIFO queue: the key is the message group, the ID the
// deduplication ID.
func ExampleOpenTopic() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	orders, err := sqsfifo.OpenTopic(ctx, client, "orders.fifo", nil)
	if err != nil {
		log.Fatal(err) // errors.Is(err, broker.ErrNotFound) for a missing queue
	}
	defer orders.Close()
	err = orders.Publish(ctx, &broker.Message{
		ID:   "order-42/placed",
		Key:  "order-42",
		Body: []byte(`{"order":42,"status":"placed"}`),
	})
	var be *broker.Error
	if errors.As(err, &be) {
		for i, e := range be.Messages { // nil: sent
			var refused *sqsfifo.EntryError
			if orders.ErrorAs(e, &refused) {
				log.Printf("message %d refused by SQS: %s", i, refused.Code)
			}
		}
	}
}

// Consume with the handler loop: one handler at a time per message group,
// the visibility timeout extended while a handler runs.
func ExampleOpenSubscription() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	sub, err := sqsfifo.OpenSubscription(ctx, client, "orders.fifo", &sqsfifo.SubscriptionOptions{WaitTime: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	err = sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
		if len(d.Message.Body) == 0 {
			return broker.Permanent(errors.New("empty order")) // to the dead-letter queue
		}
		log.Printf("%s (attempt %d): %s", d.Message.ID, d.Attempt, d.Message.Body)
		return nil // acked (deleted)
	}, &broker.RunOptions{Concurrency: 8, PerKey: true})
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// Read what was dead-lettered, with the reason.
func ExampleOpenDeadLetters() {
	ctx := context.Background()
	cfg, _ := config.LoadDefaultConfig(ctx)
	dead, err := sqsfifo.OpenDeadLetters(ctx, sqs.NewFromConfig(cfg), "orders.fifo", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer dead.Close()
	ds, err := dead.Receive(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ds {
		log.Printf("%s: %s", d.Message.ID, d.Message.Headers.Get(driver.HeaderDeadLetterReason))
	}
}

// Open by URL, against LocalStack: the client comes from the SDK's
// default chain, with the endpoint and region from the URL.
func Example_uRL() {
	ctx := context.Background()
	topic, err := broker.OpenTopic(ctx, "sqsfifo://orders.fifo?region=us-east-1&endpoint=http://127.0.0.1:4566")
	if err != nil {
		log.Fatal(err)
	}
	defer topic.Close()
	sub, err := broker.OpenSubscription(ctx, "sqsfifo://orders.fifo?region=us-east-1&endpoint=http://127.0.0.1:4566&wait_time=5s")
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
}
