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

// TestOpenTopicOnTheProgramsClient: a topic on a client the program runs
// (a plain one, without TopicOpts) publishes through it, leaves it open
// when closed, and refuses a client that could lose or duplicate records.
func TestOpenTopicOnTheProgramsClient(t *testing.T) {
	e := newTestEnv(t)
	name := e.createTopic(t, 2, "borrowed")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := e.producer(t)
	pub, err := kafka.OpenTopic(ctx, cl, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*broker.Message
	for i := range 3 {
		msgs = append(msgs, &broker.Message{ID: fmt.Sprint("m", i), Key: fmt.Sprint("k", i), Body: []byte("x")})
	}
	if err := pub.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	var got *kgo.Client
	if !pub.As(&got) || got != cl {
		t.Errorf("As(**kgo.Client) = %v, want the program's client", got)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: name, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("the program's client after the topic closed: %v", err)
	}
	sub, err := e.openSub(ctx, t, name, uniqueName("g"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	seen := map[string]bool{}
	for len(seen) < 3 {
		ds, err := sub.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			seen[d.Message.ID] = true
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, m := range msgs {
		if !seen[m.ID] {
			t.Errorf("%s not received (got %v)", m.ID, seen)
		}
	}

	lossy, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer lossy.Close()
	if _, err := kafka.OpenTopic(ctx, lossy, name, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("OpenTopic on a client with leader acks: %v, want ErrInvalid", err)
	}
	if _, err := kafka.OpenTopic(ctx, cl, uniqueName("missing"), nil); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("OpenTopic of a missing topic: %v, want ErrNotFound", err)
	}
	if _, err := kafka.OpenTopic(ctx, nil, name, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("OpenTopic without a client: %v, want ErrInvalid", err)
	}
}
