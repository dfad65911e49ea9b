package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestRetryTopic: a nack writes a copy to the retry topic with its
// delivery number and due time; the copy comes back no sooner than the
// delay, counted; past the limit the message is dead-lettered.
func TestRetryTopic(t *testing.T) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 2, "retry-main")
	retry := e.createTopic(t, 1, "retry")
	dlq := e.createTopic(t, 1, "retry-dlq")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	so := &kafka.SubscriptionOptions{RetryTopic: retry, DeadLetterTopic: dlq, DeliveryLimit: 3}
	top, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := e.openSub(ctx, t, topic, uniqueName("g"), so)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "r1", Key: "k", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	for want := 1; want <= 3; want++ {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		d := ds[0]
		if d.Message.ID != "r1" || d.Attempt != want || string(d.Message.Body) != "x" || d.Message.Key != "k" {
			t.Fatalf("delivery %d: id %s attempt %d key %q", want, d.Message.ID, d.Attempt, d.Message.Key)
		}
		if want == 2 && time.Since(at) < 300*time.Millisecond {
			t.Fatalf("retry copy came back after %s, before the delay", time.Since(at))
		}
		for k := range d.Message.Headers.All() {
			if k == kafka.HeaderAttempt || k == kafka.HeaderNotBefore {
				t.Fatalf("internal header %s leaked", k)
			}
		}
		at = time.Now()
		delay := time.Duration(0)
		if want == 1 {
			delay = 300 * time.Millisecond
		}
		if err := d.Nack(ctx, delay); err != nil {
			t.Fatal(err)
		}
	}
	qctx, qcancel := context.WithTimeout(ctx, time.Second)
	defer qcancel()
	if ds, err := sub.Receive(qctx, 1); err == nil {
		t.Fatalf("delivered past the limit: %s attempt %d", ds[0].Message.ID, ds[0].Attempt)
	}
	dl, err := e.openDeadLetters(ctx, t, dlq, uniqueName("g"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	ds, err := dl.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Message.ID != "r1" || ds[0].Message.Headers.Get(driver.HeaderDeadLetterReason) == "" {
		t.Fatalf("dead letter: %+v", ds[0].Message)
	}
}
