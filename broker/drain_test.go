package broker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
)

// drainFixture is a memory queue holding five messages of one key.
func drainFixture(t *testing.T) (*broker.Subscription, func() *broker.Subscription) {
	t.Helper()
	b := memory.New(nil)
	t.Cleanup(func() { b.Close() })
	if err := b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.Queue}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("orders", "billing"); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	var msgs []*broker.Message
	for i := 1; i <= 5; i++ {
		msgs = append(msgs, &broker.Message{ID: fmt.Sprintf("m%d", i), Key: "order-1", Body: []byte("x")})
	}
	if err := topic.Publish(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	open := func() *broker.Subscription {
		sub, err := b.OpenSubscription("orders", "billing", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		return sub
	}
	return open(), open
}

// TestRunDrainsOnCancel: cancelling Run while a handler is in flight and
// four deliveries of its key wait behind it lets the running handler
// finish with a live context and be acked; the four waiting ones never
// start, and are left unsettled, so that once the subscription closes the
// next consumer gets them at once, in order.
func TestRunDrainsOnCancel(t *testing.T) {
	sub, open := drainFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan string, 5)
	finish := make(chan struct{})
	var mu sync.Mutex
	var ran []string
	var ctxErrAtEnd error
	runErr := make(chan error, 1)
	go func() {
		runErr <- sub.Run(ctx, func(hctx context.Context, d *broker.Delivery) error {
			mu.Lock()
			ran = append(ran, d.Message.ID)
			mu.Unlock()
			started <- d.Message.ID
			if d.Message.ID == "m1" {
				<-finish
				mu.Lock()
				ctxErrAtEnd = hctx.Err()
				mu.Unlock()
			}
			return nil
		}, &broker.RunOptions{Concurrency: 2, PerKey: true, MaxOutstanding: 10})
	}()
	if id := <-started; id != "m1" {
		t.Fatalf("first handler ran %s, want m1", id)
	}
	// m1 holds its key until finish is closed, so whatever Run received of
	// m2..m5 waits behind it; Run is canceled before m1 ends.
	cancel()
	close(finish)
	if err := <-runErr; err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []string{"m1"}) {
		t.Errorf("handlers started: %v, want only m1 (the queued ones must not start once Run is stopping)", ran)
	}
	if ctxErrAtEnd != nil {
		t.Errorf("the in-flight handler's context ended during the drain: %v", ctxErrAtEnd)
	}
	// The program closes the subscription after Run, as at shutdown: what
	// Run left unsettled goes back to the broker, in its order.
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, open(), 4)
	if !slices.Equal(got, []string{"m2", "m3", "m4", "m5"}) {
		t.Errorf("after the drain and Close the next consumer got %v, want m2..m5 in order (m1 acked, the rest left to the broker)", got)
	}
}

// receiveAll receives (and acks) until it has n deliveries, failing t
// when the broker has none to give for 2 seconds.
func receiveAll(t *testing.T, sub *broker.Subscription, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		ds, err := sub.Receive(ctx, n-len(got))
		cancel()
		if err != nil {
			t.Fatalf("receive: %v (got %v so far)", err, got)
		}
		for _, d := range ds {
			got = append(got, d.Message.ID)
			if err := d.Ack(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got
}

// TestRunDrainTimeoutCancelsHandlers: a handler still running when
// DrainTimeout has passed gets its context canceled, and Run returns once
// it has returned; its delivery, neither acked nor retried, comes back
// with the four that waited behind it once the subscription closes, in
// its place before them.
func TestRunDrainTimeoutCancelsHandlers(t *testing.T) {
	sub, open := drainFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{}, 5)
	runErr := make(chan error, 1)
	var cause error
	go func() {
		runErr <- sub.Run(ctx, func(hctx context.Context, d *broker.Delivery) error {
			started <- struct{}{}
			<-hctx.Done() // ignores nothing: waits for the drain to give up
			cause = hctx.Err()
			return hctx.Err()
		}, &broker.RunOptions{Concurrency: 1, PerKey: true, DrainTimeout: time.Millisecond})
	}()
	<-started
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if cause != context.Canceled {
		t.Fatalf("the handler's context ended with %v, want context.Canceled after the drain timeout", cause)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, open(), 5)
	if !slices.Equal(got, []string{"m1", "m2", "m3", "m4", "m5"}) {
		t.Errorf("after the drain gave up the next consumer got %v, want m1..m5 in order (the canceled handler's delivery left unsettled in its place, not retried behind its key)", got)
	}
}
