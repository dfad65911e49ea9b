package gcppubsub_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/gcppubsub"
)

func TestRoundTrip(t *testing.T) {
	for _, ordering := range []bool{false, true} {
		t.Run(map[bool]string{false: "unordered", true: "ordered"}[ordering], func(t *testing.T) {
			e := newTestEnv(t)
			c := e.create(t, subSpec{AckDeadline: 10 * time.Second, Ordering: ordering, MaxAttempts: 5})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			top, sub := e.open(t, c)
			t.Logf("topic: %s\n  %s", top.Capabilities(), top.Capabilities().Source.Read)
			t.Logf("subscription: %s\n  %s", sub.Capabilities(), sub.Capabilities().Source.Read)
			if got := top.Capabilities().OrderingKey != ""; got != ordering {
				t.Errorf("topic sends ordering keys: %t, want %t", got, ordering)
			}
			msgs := []*broker.Message{
				{ID: "plain-1", Key: "g1", Body: []byte("hello"), Headers: broker.Headers{{"a", "b"}, {"empty", ""}}},
				{ID: "binary", Key: "key with space ☃", Body: []byte{0, 1, 2, 0xff, 0xfe}},
				{ID: "empty-body", Key: "g1", Body: []byte{}},
				{ID: "no-key", Body: []byte("x")},
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
					var rm *pubsubpb.ReceivedMessage
					var pm *pubsubpb.PubsubMessage
					if !d.Message.As(&rm) || !d.Message.As(&pm) || pm != rm.GetMessage() || !bytes.Equal(pm.GetData(), d.Message.Body) || d.Message.As(new(int)) {
						t.Errorf("%q: Message.As: %v, %v", d.Message.ID, rm, pm)
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
				if len(d.Message.Headers) != len(m.Headers) {
					t.Errorf("%q: headers %v, want %v", m.ID, d.Message.Headers, m.Headers)
				}
				for k, v := range m.Headers.All() {
					if d.Message.Headers.Get(k) != v {
						t.Errorf("%q: header %q = %q, want %q", m.ID, k, d.Message.Headers.Get(k), v)
					}
				}
			}
		})
	}
}

func TestOpenMissing(t *testing.T) {
	e := newTestEnv(t)
	if _, err := gcppubsub.OpenTopic(t.Context(), e.client, "missing", nil); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("open a missing topic: %v, want ErrNotFound", err)
	}
	if _, err := gcppubsub.OpenSubscription(t.Context(), e.client, "missing", nil); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("open a missing subscription: %v, want ErrNotFound", err)
	}
	if _, err := gcppubsub.OpenTopic(t.Context(), e.client, "projects/p/subscriptions/x", nil); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("open a topic by a subscription's name: %v, want ErrInvalid", err)
	}
}
