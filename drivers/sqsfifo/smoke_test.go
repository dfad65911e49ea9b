package sqsfifo_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

func TestRoundTrip(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	url, _ := e.createQueue(t, sqsemu.QueueSpec{Visibility: 5 * time.Second, MaxReceive: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	top, err := sqsfifo.OpenTopic(ctx, e.client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := sqsfifo.OpenSubscription(ctx, e.client, url, &sqsfifo.SubscriptionOptions{WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	t.Logf("caps: %s", top.Capabilities())
	msgs := []*broker.Message{
		{ID: "plain-1", Key: "g1", Body: []byte("hello"), Headers: broker.Headers{{"a", "b"}, {"empty", ""}}},
		{ID: "id with spaces é", Key: "key with space ☃", Body: []byte{0, 1, 2, 0xff, 0xfe}},
		{ID: "empty-body", Key: "g1", Body: []byte{}},
		{ID: "emoji", Key: "g2", Body: []byte("smile 😀")},
	}
	if err := top.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	got := map[string]*broker.Delivery{}
	for len(got) < len(msgs) {
		ds, err := sub.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got[d.Message.ID] = d
			var raw types.Message
			if !d.Message.As(&raw) || aws.ToString(raw.ReceiptHandle) == "" || d.Message.As(new(int)) {
				t.Errorf("%q: Message.As: %+v", d.Message.ID, raw)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("ack %s: %v", d.Message.ID, err)
			}
		}
	}
	for _, m := range msgs {
		d := got[m.ID]
		if d == nil {
			t.Fatalf("%q not received", m.ID)
		}
		if d.Message.Key != m.Key || !bytes.Equal(d.Message.Body, m.Body) || d.Attempt != 1 {
			t.Errorf("%q: got key %q body %q attempt %d", m.ID, d.Message.Key, d.Message.Body, d.Attempt)
		}
		for k, v := range m.Headers.All() {
			if d.Message.Headers.Get(k) != v {
				t.Errorf("%q: header %q = %q, want %q", m.ID, k, d.Message.Headers.Get(k), v)
			}
		}
	}
}

func TestStandardQueueRefused(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	url, _ := e.createQueue(t, sqsemu.QueueSpec{Standard: true})
	_, err := sqsfifo.OpenTopic(t.Context(), e.client, url, nil)
	if !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("open a standard queue: %v, want ErrInvalid", err)
	}
	_, err = sqsfifo.OpenSubscription(t.Context(), e.client, "missing-"+sqsemu.UniqueName("q")+".fifo", nil)
	if !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("open a missing queue: %v, want ErrNotFound", err)
	}
}
