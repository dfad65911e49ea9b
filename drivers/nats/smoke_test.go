package nats_test

import (
	"errors"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/nats"
)

// TestSmoke publishes with and without a key, receives, nacks, acks and
// dead-letters on the local server.
func TestSmoke(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{AckWait: 5 * time.Second, MaxDeliver: 4})
	ctx := ctxT(t)
	top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	t.Logf("topic: %s", top.Capabilities())
	t.Logf("subscription: %s", sub.Capabilities())
	if err := top.Publish(ctx, &broker.Message{ID: "a", Key: "k.1", Headers: broker.Headers{{"h", "v"}}, Body: []byte("x")}, &broker.Message{ID: "b", Body: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for len(ds) < 2 {
		more, err := sub.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, more...)
	}
	got := map[string]*broker.Delivery{}
	for _, d := range ds {
		got[d.Message.ID] = d
	}
	if a := got["a"]; a == nil || a.Message.Key != "k.1" || a.Message.Headers.Get("h") != "v" || string(a.Message.Body) != "x" || a.Attempt != 1 {
		t.Fatalf("a: %+v", a)
	}
	if err := got["a"].Nack(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := got["b"].DeadLetter(ctx, "bad b"); err != nil {
		t.Fatal(err)
	}
	d, err := sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d[0].Message.ID != "a" || d[0].Attempt != 2 {
		t.Fatalf("redelivery: %s attempt %d", d[0].Message.ID, d[0].Attempt)
	}
	if err := d[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d[0].Ack(ctx); err != nil && !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("second ack: %v", err)
	}
	dl, err := nats.OpenDeadLetters(ctx, js, spec.Stream, spec.Consumer, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	dd, err := dl.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m := dd[0].Message; m.ID != "b" || m.Headers.Get(driver.HeaderDeadLetterReason) != "bad b" || string(m.Body) != "y" {
		t.Fatalf("dead letter: %+v", m)
	}
	t.Logf("dead letters: %s", dl.Capabilities())
}
