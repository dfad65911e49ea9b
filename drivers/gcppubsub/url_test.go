package gcppubsub_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	_ "github.com/wary-go/wary/drivers/gcppubsub"
)

// TestURL opens topics, subscriptions and dead letters by URL, on the
// emulator at PUBSUB_EMULATOR_HOST, as the SDK finds it; malformed URLs
// are ErrInvalid without echoing values.
func TestURL(t *testing.T) {
	e := newTestEnv(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", e.srv.Addr)
	c := e.create(t, subSpec{AckDeadline: 10 * time.Second, MaxAttempts: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	top, err := broker.OpenTopic(ctx, "gcppubsub://"+c.Topic)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := broker.OpenSubscription(ctx, "gcppubsub://"+c.Sub+"?wait_time=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "u1", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var d *broker.Delivery
	for d == nil {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			d = ds[0]
		}
	}
	if err := d.DeadLetter(ctx, "bad order"); err != nil {
		t.Fatal(err)
	}
	dead, err := broker.OpenDeadLetters(ctx, "gcppubsub://"+c.Sub+"?wait_time=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	for {
		ds, err := dead.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			continue
		}
		if ds[0].Message.ID != "u1" || ds[0].Message.Headers[broker.HeaderDeadLetterReason] != "bad order" {
			t.Fatalf("dead letter %q, headers %v", ds[0].Message.ID, ds[0].Message.Headers)
		}
		_ = ds[0].Ack(ctx)
		break
	}
	for _, u := range []string{
		"gcppubsub://projects/p/topics/t?secret=hunter2",
		"gcppubsub://projects/p/queues/t",
		"gcppubsub://projects/p/subscriptions/s?ordering=hunter2",
	} {
		_, err := broker.OpenTopic(ctx, u)
		if !errors.Is(err, broker.ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenTopic(%s): %v, want ErrInvalid without the value", u, err)
		}
	}
	if _, err := broker.OpenSubscription(ctx, "gcppubsub://projects/p/topics/t"); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("OpenSubscription of a topic URL: %v, want ErrInvalid", err)
	}
}
