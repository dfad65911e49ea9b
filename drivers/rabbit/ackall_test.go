package rabbit_test

import (
	"slices"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
)

// TestAckAllMultiple: broker.AckAll acks a channel's deliveries with one
// multiple ack up to the first tag it must not cover (one settled out of
// order before, one left unsettled), and the rest one by one; the one left
// out stays unsettled, and nothing acked comes back.
func TestAckAllMultiple(t *testing.T) {
	f := newPrefetchFixture(t, 20)
	ctx := ctxT(t)
	sub, err := rabbit.OpenSubscription(ctx, f.c, f.top, &rabbit.SubscriptionOptions{Prefetch: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	receive := func(n int) []*broker.Delivery {
		var ds []*broker.Delivery
		for len(ds) < n {
			got, err := sub.Receive(ctx, n-len(ds))
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, got...)
		}
		return ds
	}
	ds := receive(20)
	// In order: one frame for ten.
	before := rabbit.AckFrames(sub)
	if errs := broker.AckAll(ctx, ds[:10]); errs != nil {
		t.Fatalf("AckAll: %v", errs)
	}
	if n := rabbit.AckFrames(sub) - before; n != 1 {
		t.Errorf("%d ack frames for ten deliveries in order, want 1", n)
	}
	// Out of order: ds[12] acked alone before, ds[15] left unsettled.
	if err := ds[12].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	left := ds[15]
	rest := slices.Delete(slices.Clone(ds[10:]), 5, 6)
	before = rabbit.AckFrames(sub)
	if errs := broker.AckAll(ctx, rest); errs != nil {
		t.Fatalf("AckAll: %v", errs)
	}
	// Multiple up to ds[14], then ds[16..19] one by one.
	if n := rabbit.AckFrames(sub) - before; n != 5 {
		t.Errorf("%d ack frames, want 5 (one multiple, four single)", n)
	}
	if left.Settled() {
		t.Fatal("the delivery left out is settled")
	}
	// The one left out is still ours to settle: nacked, it comes back.
	if err := left.Nack(ctx, 0); err != nil {
		t.Fatalf("nack of the delivery left out: %v", err)
	}
	again := receive(1)[0]
	if again.Message.ID != left.Message.ID {
		t.Fatalf("redelivered %s, want %s", again.Message.ID, left.Message.ID)
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	// A frame acking a tag twice, or one unknown, would have made the
	// server close the channel; a synchronous call on it after the acks
	// shows it did not, and that nothing acked is counted unacked.
	var ch *amqp.Channel
	if !sub.As(&ch) || ch == nil {
		t.Fatal("no channel")
	}
	q, err := ch.QueueDeclarePassive(f.top.Queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("the consumer's channel after the acks: %v", err)
	}
	if q.Messages != 0 {
		t.Errorf("%d messages ready, want 0", q.Messages)
	}
}
