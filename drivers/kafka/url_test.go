package kafka_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

func TestURLs(t *testing.T) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 2, "url")
	ctx := context.Background()
	brokers := e.seeds[0]
	if _, err := broker.OpenTopic(ctx, "kafka://"+topic+"?brokers="+brokers+"&bogus=1"); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("unknown parameter: %v", err)
	}
	if _, err := broker.OpenSubscription(ctx, "kafka://g?topic="+topic+"&brokers="+brokers+"&ordered=maybe"); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("bad bool: %v", err)
	}
	top, err := broker.OpenTopic(ctx, "kafka://"+topic+"?brokers="+brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := broker.OpenSubscription(ctx, "kafka://"+uniqueName("g")+"?topic="+topic+"&brokers="+brokers+"&ordered=true&commit_interval=100ms")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !sub.Capabilities().HeadOfLine {
		t.Fatalf("ordered=true not applied: %s", sub.Capabilities())
	}
	if err := top.Publish(ctx, &broker.Message{ID: "u1", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil || ds[0].Message.ID != "u1" {
		t.Fatalf("receive: %v %v", ds, err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	var sopts kafka.SubscriptionOptions
	_ = sopts
}
