package rabbit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
)

// prefetchFixture is a quorum queue holding n messages and a way to read
// how many of them RabbitMQ still holds ready (not handed to a consumer).
type prefetchFixture struct {
	t     *testing.T
	c     *rabbit.Conn
	top   rabbit.Topology
	ready func() int
}

func newPrefetchFixture(t *testing.T, n int) *prefetchFixture {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("prefetch")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, DeadLetter: true})
	topic, err := rabbit.OpenTopic(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	msgs := make([]*broker.Message, n)
	for i := range msgs {
		msgs[i] = &broker.Message{ID: fmt.Sprintf("m-%02d", i), Body: []byte("x")}
	}
	if err := topic.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	f := &prefetchFixture{t: t, c: c, top: top}
	f.ready = func() int {
		t.Helper()
		ch, err := c.Connection().Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		q, err := ch.QueueDeclarePassive(top.Queue, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return q.Messages
	}
	if got := f.ready(); got != n {
		t.Fatalf("%d messages ready after publishing %d", got, n)
	}
	return f
}

// waitReady polls the queue until want messages are ready: RabbitMQ hands
// out deliveries asynchronously and tells nobody when it stops.
func (f *prefetchFixture) waitReady(ctx context.Context, want int) {
	f.t.Helper()
	last := -1
	for {
		if last = f.ready(); last == want {
			return
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("%d messages ready, want %d", last, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// started waits for n handlers to report on ch.
func started(ctx context.Context, t *testing.T, ch <-chan struct{}, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%d handlers started, want %d", i, n)
		}
	}
}

// RunOptions.Concurrency alone sets the prefetch: with Concurrency 8, Run
// asks for 16 outstanding deliveries and RabbitMQ hands 16 of 20 messages
// to the consumer, whose 8 handlers block. A new consumer channel (here the
// old one closed under it, as after a reconnect) gets the same prefetch.
func TestRunConcurrencySetsPrefetch(t *testing.T) {
	f := newPrefetchFixture(t, 20)
	ctx := ctxT(t)
	sub, err := rabbit.OpenSubscription(ctx, f.c, f.top, &rabbit.SubscriptionOptions{NackDelay: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	// First deliveries block until release1; redeliveries (on the second
	// channel) until release2.
	release1, release2 := make(chan struct{}), make(chan struct{})
	first, again := make(chan struct{}, 20), make(chan struct{}, 20)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(runCtx, func(ctx context.Context, d *broker.Delivery) error {
			if !d.Redelivered {
				first <- struct{}{}
				<-release1
				return nil
			}
			again <- struct{}{}
			<-release2
			return nil
		}, &broker.RunOptions{Concurrency: 8})
	}()
	var once1, once2 sync.Once
	rel1 := func() { once1.Do(func() { close(release1) }) }
	rel2 := func() { once2.Do(func() { close(release2) }) }
	defer func() {
		rel1()
		rel2()
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	started(ctx, t, first, 8) // a prefetch of 2 would stop at 2
	f.waitReady(ctx, 20-16)

	// Close the consumer's channel: RabbitMQ requeues the 16, the handlers
	// return (their acks fail: the channel is gone) and Run receives on a
	// new channel, which must have the same prefetch.
	var ch *amqp.Channel
	if !sub.As(&ch) || ch == nil {
		t.Fatal("no consumer channel")
	}
	_ = ch.Close()
	rel1()
	started(ctx, t, again, 8)
	f.waitReady(ctx, 20-16)
}

// An explicit SubscriptionOptions.Prefetch wins over Run's: with Prefetch
// 3 and Concurrency 8, RabbitMQ hands out 3 of 20 messages. Without Run, a
// subscription read with Receive alone has the default prefetch, 2.
func TestExplicitPrefetchWins(t *testing.T) {
	t.Run("explicit", func(t *testing.T) {
		f := newPrefetchFixture(t, 20)
		ctx := ctxT(t)
		so := &rabbit.SubscriptionOptions{NackDelay: true}
		so.Prefetch = 3
		sub, err := rabbit.OpenSubscription(ctx, f.c, f.top, so)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		release, running := make(chan struct{}), make(chan struct{}, 20)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- sub.Run(runCtx, func(ctx context.Context, d *broker.Delivery) error {
				running <- struct{}{}
				<-release
				return nil
			}, &broker.RunOptions{Concurrency: 8})
		}()
		defer func() {
			close(release)
			stop()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}()
		started(ctx, t, running, 3)
		// Three handlers run: RabbitMQ checked out exactly 3 (with a
		// prefetch of 16 it would have handed out more than that).
		if got := f.ready(); got != 17 {
			t.Errorf("%d messages ready with 3 handlers running, want 17", got)
		}
		if n := len(running); n != 0 {
			t.Errorf("%d more handlers started with Prefetch 3", n)
		}
	})
	t.Run("receive", func(t *testing.T) {
		f := newPrefetchFixture(t, 20)
		ctx := ctxT(t)
		sub, err := rabbit.OpenSubscription(ctx, f.c, f.top, &rabbit.SubscriptionOptions{NackDelay: true})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		ds, err := sub.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 2 {
			t.Fatalf("received %d at once with the default prefetch", len(ds))
		}
		f.waitReady(ctx, 18)
	})
}
