package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

func TestPublishReceiveAck(t *testing.T) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 3, "smoke")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pub, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var msgs []*broker.Message
	for i := range 50 {
		msgs = append(msgs, &broker.Message{ID: fmt.Sprint(i), Key: fmt.Sprint(i % 7), Headers: broker.Headers{{"h", "v"}}, Body: []byte("body")})
	}
	if err := pub.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	sub, err := e.openSub(ctx, t, topic, uniqueName("g"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	seen := map[string]bool{}
	for len(seen) < 50 {
		ds, err := sub.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Message.Headers.Get("h") != "v" || string(d.Message.Body) != "body" {
				t.Fatalf("bad message %+v", d.Message)
			}
			var r *kgo.Record
			if !d.Message.As(&r) || r.Topic != topic || string(r.Value) != "body" || d.Message.As(new(int)) {
				t.Fatalf("Message.As: %+v", r)
			}
			seen[d.Message.ID] = true
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCrashRedeliversAfterUnacked closes a consumer that acked records
// after an unacked one: the next consumer gets the unacked record and every
// record after it.
func TestCrashRedeliversAfterUnacked(t *testing.T) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 1, "crash")
	group := uniqueName("g")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pub, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := range 10 {
		if err := pub.Publish(ctx, &broker.Message{ID: fmt.Sprint(i), Body: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := e.openSub(ctx, t, topic, group, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*broker.Delivery
	for len(got) < 10 {
		ds, err := sub.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ds...)
	}
	for i, d := range got {
		if d.Message.ID != fmt.Sprint(i) {
			t.Fatalf("delivery %d is message %s", i, d.Message.ID)
		}
		if i == 3 {
			continue
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := got[3].Ack(ctx); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("ack after close: %v", err)
	}
	sub2, err := e.openSub(ctx, t, topic, group, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Close()
	var ids []string
	for len(ids) < 7 {
		ds, err := sub2.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			ids = append(ids, d.Message.ID)
		}
	}
	if fmt.Sprint(ids) != "[3 4 5 6 7 8 9]" {
		t.Fatalf("redelivered %v, want [3 4 5 6 7 8 9]", ids)
	}
}
