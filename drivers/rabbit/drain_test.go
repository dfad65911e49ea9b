package rabbit_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
)

// TestDrainTimeoutKeepsKeyOrder: with PerKey, a handler of key K still
// running past RunOptions.DrainTimeout while later messages of K wait
// behind it leaves its delivery unsettled, as they are, so that once the
// subscription closes a fresh consumer gets K's messages in their
// original order (a nack would send it behind them: a delayed retry
// comes back after them, and a quorum queue requeues at its tail).
func TestDrainTimeoutKeepsKeyOrder(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("drainorder")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, DeliveryLimit: 20, DeadLetter: true})
	topic, err := rabbit.OpenTopic(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	var want []string
	var msgs []*broker.Message
	for i := 1; i <= 5; i++ {
		id := fmt.Sprintf("m%d", i)
		want = append(want, id)
		msgs = append(msgs, &broker.Message{ID: id, Key: "K", Body: []byte(id)})
	}
	if err := topic.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	sub, err := rabbit.OpenSubscription(ctx, c, top, &rabbit.SubscriptionOptions{NackDelay: true})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	started := make(chan string, len(msgs))
	runErr := make(chan error, 1)
	go func() {
		runErr <- sub.Run(runCtx, func(hctx context.Context, d *broker.Delivery) error {
			started <- d.Message.ID
			<-hctx.Done() // stuck until the drain gives up on it
			return hctx.Err()
		}, &broker.RunOptions{Concurrency: 2, PerKey: true, MaxOutstanding: 10, DrainTimeout: time.Millisecond})
	}()
	if id := <-started; id != "m1" {
		t.Fatalf("first handler ran %s, want m1", id)
	}
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if n := len(started); n != 0 {
		t.Fatalf("%d more handlers started behind m1 on its key", n)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}

	fresh, err := rabbit.OpenSubscription(ctx, c, top, &rabbit.SubscriptionOptions{NackDelay: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	var got []string
	for len(got) < len(want) {
		ds, err := fresh.Receive(ctx, len(want)-len(got))
		if err != nil {
			t.Fatalf("receive: %v (got %v so far)", err, got)
		}
		for _, d := range ds {
			got = append(got, d.Message.ID)
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the drain timed out a fresh consumer got %v, want %v: key K applied out of order", got, want)
	}
}
