// Command quickstart publishes a few order events to the embedded
// in-memory broker (profile "sqsfifo": per-group order, head-of-line
// blocking, a dedup window), consumes them with the handler loop, and
// prints what happened: one duplicate dropped by the broker's dedup window,
// one handler failure retried, per-order sequence kept.
//
//	go -C examples run ./quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/wary-go/wary/broker"
	_ "github.com/wary-go/wary/drivers/memory" // registers mem://
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	const url = "mem://orders?profile=sqsfifo"
	topic, err := broker.OpenTopic(ctx, url)
	if err != nil {
		return err
	}
	defer topic.Close()
	sub, err := broker.OpenSubscription(ctx, "mem://orders/billing?profile=sqsfifo")
	if err != nil {
		return err
	}
	defer sub.Close()
	fmt.Printf("capabilities: %s\n", topic.Capabilities())

	events := []*broker.Message{
		{ID: "order-1/created", Key: "order-1", Body: []byte(`{"order":1,"event":"created"}`)},
		{ID: "order-2/created", Key: "order-2", Body: []byte(`{"order":2,"event":"created"}`)},
		{ID: "order-1/paid", Key: "order-1", Body: []byte(`{"order":1,"event":"paid"}`)},
		{ID: "order-1/shipped", Key: "order-1", Body: []byte(`{"order":1,"event":"shipped"}`)},
	}
	if err := topic.Publish(ctx, events...); err != nil {
		return err
	}
	// A producer retry: the same ID again, inside the dedup window.
	if err := topic.Publish(ctx, &broker.Message{ID: "order-1/paid", Key: "order-1", Body: []byte(`{"order":1,"event":"paid"}`)}); err != nil {
		return err
	}
	fmt.Println("published 5 messages (one a retry of order-1/paid)")

	var mu sync.Mutex
	handled := 0
	failedOnce := false
	runCtx, stop := context.WithCancel(ctx)
	err = sub.Run(runCtx, func(ctx context.Context, d *broker.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if d.Message.ID == "order-2/created" && !failedOnce {
			failedOnce = true
			fmt.Printf("handle %-16s attempt %d: failing on purpose (will be retried)\n", d.Message.ID, d.Attempt)
			return errors.New("payment service unavailable")
		}
		handled++
		fmt.Printf("handle %-16s attempt %d: %s\n", d.Message.ID, d.Attempt, d.Message.Body)
		if handled == len(events) {
			stop()
		}
		return nil
	}, &broker.RunOptions{Concurrency: 2, PerKey: true, Backoff: broker.Backoff{Initial: 10 * time.Millisecond}})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "done: %d distinct events handled, the duplicate publish was dropped by the broker's dedup window\n", handled)
	return nil
}
