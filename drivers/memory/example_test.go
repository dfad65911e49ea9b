package memory_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
)

func ExampleBroker() {
	ctx := context.Background()
	b := memory.New(nil)
	if err := b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.SQSFIFO}); err != nil {
		log.Fatal(err)
	}
	if err := b.CreateSubscription("orders", "billing"); err != nil {
		log.Fatal(err)
	}
	// The handle's options embed the portable ones; the topic's behaviour
	// is its TopicConfig.
	topic, _ := b.OpenTopic("orders", &memory.TopicOptions{TopicOptions: broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 3}}})
	defer topic.Close()
	sub, _ := b.OpenSubscription("orders", "billing", nil)
	defer sub.Close()

	err := topic.Publish(ctx,
		&broker.Message{ID: "o-1", Key: "customer-7", Body: []byte("created")},
		&broker.Message{ID: "o-1", Key: "customer-7", Body: []byte("created")}, // a duplicate: dropped
		&broker.Message{ID: "o-2", Key: "customer-7", Body: []byte("paid")},
	)
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		ds, err := sub.Receive(ctx, 10)
		if err != nil {
			log.Fatal(err)
		}
		for _, d := range ds {
			fmt.Printf("%s %s attempt %d\n", d.Message.ID, d.Message.Body, d.Attempt)
			if err := d.Ack(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Println(sub.Capabilities().Ordering, topic.Capabilities().DedupWindow)
	// Output:
	// o-1 created attempt 1
	// o-2 paid attempt 1
	// message group 5m0s
}

func ExampleNew_fakeClock() {
	ctx := context.Background()
	clock := memory.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	b := memory.New(&memory.Options{Clock: clock})
	_ = b.CreateTopic("jobs", &memory.TopicConfig{LockTimeout: 30 * time.Second})
	_ = b.CreateSubscription("jobs", "workers")
	topic, _ := b.OpenTopic("jobs", nil)
	defer topic.Close()
	sub, _ := b.OpenSubscription("jobs", "workers", nil)
	defer sub.Close()

	_ = topic.Publish(ctx, &broker.Message{ID: "job-1", Body: []byte("resize")})
	first, _ := sub.Receive(ctx, 1)
	fmt.Println("received", first[0].Message.ID, "attempt", first[0].Attempt)

	// The worker stalls; once the lock timeout passes the job is delivered
	// again, and the stalled worker can no longer settle it.
	clock.Advance(30 * time.Second)
	again, _ := sub.Receive(ctx, 1)
	fmt.Println("received", again[0].Message.ID, "attempt", again[0].Attempt, "redelivered", again[0].Redelivered)
	err := first[0].Ack(ctx)
	fmt.Println("late ack lost the lock:", errors.Is(err, broker.ErrLockLost))
	fmt.Println("ack:", again[0].Ack(ctx))
	// Output:
	// received job-1 attempt 1
	// received job-1 attempt 2 redelivered true
	// late ack lost the lock: true
	// ack: <nil>
}

func Example_url() {
	ctx := context.Background()
	// Importing the package registers "mem"; the opener creates what is missing.
	sub, err := broker.OpenSubscription(ctx, "mem://example-events/audit?profile=partitioned&partitions=2")
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	topic, err := broker.OpenTopic(ctx, "mem://example-events")
	if err != nil {
		log.Fatal(err)
	}
	defer topic.Close()
	_ = topic.Publish(ctx, &broker.Message{ID: "e-1", Key: "account-1", Body: []byte("opened")})
	ds, _ := sub.Receive(ctx, 10)
	fmt.Println(ds[0].Message.ID, sub.Capabilities().AckModel)
	// Output:
	// e-1 cumulative
}
