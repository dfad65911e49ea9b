package kafka_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestSpoofedRetryHeaders: the driver's retry headers written by another
// producer are ignored on the subscription's topic, and bounded on its
// retry topic: a due time of MaxInt64 does not hold the record for ever
// (it is due MaxNackDelay from its fetch at the latest), an attempt beyond
// the delivery limit is the limit, a malformed (or out of range) one is 1.
func TestSpoofedRetryHeaders(t *testing.T) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 1, "spoof-main")
	retry := e.createTopic(t, 1, "spoof-retry")
	dlq := e.createTopic(t, 1, "spoof-dlq")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw := e.producer(t)
	forever := strconv.FormatInt(math.MaxInt64, 10)
	rec := func(topic, id, attempt, notBefore string) *kgo.Record {
		return &kgo.Record{Topic: topic, Value: []byte(id), Headers: []kgo.RecordHeader{
			{Key: kafka.HeaderID, Value: []byte(id)},
			{Key: kafka.HeaderAttempt, Value: []byte(attempt)},
			{Key: kafka.HeaderNotBefore, Value: []byte(notBefore)},
		}}
	}
	if err := raw.ProduceSync(ctx,
		rec(topic, "main", "3", forever),
		rec(retry, "forever", forever, forever),
		rec(retry, "overflow", "99999999999999999999999", "-9223372036854775808"),
		rec(retry, "negative", "-5", "soon"),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const maxDelay = time.Second
	so := &kafka.SubscriptionOptions{RetryTopic: retry, DeadLetterTopic: dlq, DeliveryLimit: 3, MaxNackDelay: maxDelay}
	sub, err := e.openSub(ctx, t, topic, uniqueName("g"), so)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	want := map[string]int{"main": 1, "forever": 3, "overflow": 1, "negative": 1}
	start := time.Now()
	for len(want) > 0 {
		ds, err := sub.Receive(ctx, 10)
		if err != nil {
			t.Fatalf("still held: %v (%v)", want, err)
		}
		for _, d := range ds {
			id := d.Message.ID
			if a, ok := want[id]; !ok || d.Attempt != a {
				t.Errorf("%s: attempt %d, want %d", id, d.Attempt, a)
			}
			if _, ok := d.Message.Headers.Lookup(kafka.HeaderAttempt); ok {
				t.Errorf("%s: the retry header reached the message", id)
			}
			if id == "main" && time.Since(start) > maxDelay/2 && len(want) == 4 {
				t.Errorf("the main topic's record waited for its spoofed due time")
			}
			delete(want, id)
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A nack delay over MaxNackDelay is refused, and settles nothing.
	top, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "late", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds[0].Nack(ctx, maxDelay+time.Millisecond); !errors.Is(err, broker.ErrInvalid) || ds[0].Settled() {
		t.Fatalf("nack over MaxNackDelay: %v, settled %t", err, ds[0].Settled())
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestForeignDeadLetterHeadersDropped: another producer's record that
// carries the driver's dead-letter headers (and any other reserved one)
// does not read as a dead letter: the headers are dropped, the producer's
// own and the event-identity headers kept. A subscription opened on a
// dead-letter topic with OpenDeadLetters reports the reason and source of the
// dead letters the driver wrote.
func TestForeignDeadLetterHeadersDropped(t *testing.T) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 1, "foreign-main")
	dlq := e.createTopic(t, 1, "foreign-dlq")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw := e.producer(t)
	if err := raw.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x"), Headers: []kgo.RecordHeader{
		{Key: kafka.HeaderID, Value: []byte("foreign-1")},
		{Key: driver.HeaderDeadLetterReason, Value: []byte("forged")},
		{Key: kafka.HeaderDeadLetterSource, Value: []byte("forged/0@1")},
		{Key: "wary-anything", Value: []byte("forged")},
		{Key: broker.HeaderAggregateID, Value: []byte("order-1")},
		{Key: "app", Value: []byte("kept")},
	}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sub, err := e.openSub(ctx, t, topic, uniqueName("g"), &kafka.SubscriptionOptions{DeadLetterTopic: dlq})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	d := receiveOne(ctx, t, "receive", sub)
	m := d.Message
	for k := range m.Headers.All() {
		if driver.ReservedHeader(k) {
			t.Errorf("the reserved header %q reached the consumer", k)
		}
	}
	if m.ID != "foreign-1" || m.Headers.Get("app") != "kept" || m.Headers.Get(broker.HeaderAggregateID) != "order-1" {
		t.Errorf("message %q %v: the producer's own ID and headers were lost", m.ID, m.Headers)
	}
	if err := d.DeadLetter(ctx, "poison"); err != nil {
		t.Fatal(err)
	}
	dl, err := e.openDeadLetters(ctx, t, dlq, uniqueName("g"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	h := receiveOne(ctx, t, "receive the dead letter", dl).Message.Headers
	if h.Get(driver.HeaderDeadLetterReason) != "poison" || !strings.HasPrefix(h.Get(kafka.HeaderDeadLetterSource), topic+"/0@") {
		t.Errorf("dead letter headers %v: want the reason and source the driver wrote", h)
	}
	if h.Get("app") != "kept" || h.Get("wary-anything") != "" {
		t.Errorf("dead letter headers %v: want the producer's own, and no other reserved one", h)
	}
}
