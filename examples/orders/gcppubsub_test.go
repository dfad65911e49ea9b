//go:build gcppubsub

package main

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/wary-go/wary/drivers/gcppubsub/psemu"
)

// TestGCPPubSub runs the example on Google's Pub/Sub fake (pstest, served
// by psemu as its documented command does), found through
// PUBSUB_EMULATOR_HOST as the SDK finds any emulator: the topic orders
// and the subscription billing, with message ordering.
func TestGCPPubSub(t *testing.T) {
	run(t, Config{Broker: pubsubTopic(t)})
}

// pubsubTopic serves pstest, creates a topic and its subscription billing
// and returns the topic's gcppubsub:// URL.
func pubsubTopic(t *testing.T) string {
	srv, err := psemu.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := srv.NewClient(ctx, "wary")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic := "projects/wary/topics/orders-" + newSuffix()
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/wary/subscriptions/billing", Topic: topic, AckDeadlineSeconds: 10, EnableMessageOrdering: true,
	}); err != nil {
		t.Fatal(err)
	}
	return "gcppubsub://" + topic
}
