package gcppubsub_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/gcppubsub"
	"github.com/wary-go/wary/drivers/gcppubsub/psemu"
)

const project = "wary-test"

// testEnv is one pstest server and a client of it.
type testEnv struct {
	srv    *psemu.Server
	client *pubsub.Client
}

// newTestEnv starts a pstest server of the test's own (opts inject
// errors), and a client on it; both end with the test.
func newTestEnv(t conformance.T, opts ...pstest.ServerReactorOption) *testEnv {
	t.Helper()
	srv, err := psemu.Start("127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	client, err := srv.NewClient(context.Background(), project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.Close()
		_ = srv.Close()
	})
	// Connect now: the conformance suite counts the goroutines running
	// before it, and those of the connections are the test's. The client
	// dials one connection per admin client, each in the background: an
	// RPC on each waits until both are up (a connection still being made
	// when the suite counts starts its writer after, and is taken for a
	// leak).
	_, _ = client.TopicAdminClient.GetTopic(context.Background(), &pubsubpb.GetTopicRequest{Topic: "projects/" + project + "/topics/warm-up"})
	_, _ = client.SubscriptionAdminClient.GetSubscription(context.Background(), &pubsubpb.GetSubscriptionRequest{Subscription: "projects/" + project + "/subscriptions/warm-up"})
	return &testEnv{srv: srv, client: client}
}

func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// subSpec is how a test's subscription is created.
type subSpec struct {
	AckDeadline  time.Duration
	Ordering     bool
	ExactlyOnce  bool
	MaxAttempts  int // > 0: a dead-letter policy, with a dead-letter topic and its subscription
	Retention    time.Duration
	TopicRetains time.Duration
}

// names of what createSub made.
type created struct {
	Topic, Sub, DeadTopic, DeadSub string
}

func (e *testEnv) createTopic(t conformance.T, prefix string, retention time.Duration) string {
	t.Helper()
	pt := &pubsubpb.Topic{Name: "projects/" + project + "/topics/" + uniqueName(prefix)}
	if retention > 0 {
		pt.MessageRetentionDuration = durationpb.New(retention)
	}
	if _, err := e.client.TopicAdminClient.CreateTopic(context.Background(), pt); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	t.Cleanup(func() {
		_ = e.client.TopicAdminClient.DeleteTopic(context.Background(), &pubsubpb.DeleteTopicRequest{Topic: pt.Name})
	})
	return pt.Name
}

func (e *testEnv) createSub(t conformance.T, topic, prefix string, s subSpec, dead string) string {
	t.Helper()
	ps := &pubsubpb.Subscription{
		Name:                      "projects/" + project + "/subscriptions/" + uniqueName(prefix),
		Topic:                     topic,
		AckDeadlineSeconds:        int32(s.AckDeadline / time.Second),
		EnableMessageOrdering:     s.Ordering,
		EnableExactlyOnceDelivery: s.ExactlyOnce,
	}
	if s.Retention > 0 {
		ps.MessageRetentionDuration = durationpb.New(s.Retention)
	}
	if dead != "" {
		ps.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: dead, MaxDeliveryAttempts: int32(s.MaxAttempts)}
	}
	if _, err := e.client.SubscriptionAdminClient.CreateSubscription(context.Background(), ps); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	// pstest runs a goroutine per subscription until it is deleted.
	t.Cleanup(func() {
		_ = e.client.SubscriptionAdminClient.DeleteSubscription(context.Background(), &pubsubpb.DeleteSubscriptionRequest{Subscription: ps.Name})
	})
	return ps.Name
}

// create makes a topic and a subscription as s says (with a dead-letter
// topic and its subscription when s.MaxAttempts > 0).
func (e *testEnv) create(t conformance.T, s subSpec) created {
	t.Helper()
	var c created
	c.Topic = e.createTopic(t, "t", s.TopicRetains)
	if s.MaxAttempts > 0 {
		c.DeadTopic = e.createTopic(t, "dlq", 0)
		c.DeadSub = e.createSub(t, c.DeadTopic, "dlq-sub", subSpec{AckDeadline: 10 * time.Second}, "")
	}
	c.Sub = e.createSub(t, c.Topic, "s", s, c.DeadTopic)
	return c
}

// open opens the topic and the subscription of c (WaitTime 1s), closed
// when the test ends.
func (e *testEnv) open(t *testing.T, c created) (*broker.Topic, *broker.Subscription) {
	t.Helper()
	top, err := gcppubsub.OpenTopic(t.Context(), e.client, c.Topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { top.Close() })
	sub, err := gcppubsub.OpenSubscription(t.Context(), e.client, c.Sub, &gcppubsub.SubscriptionOptions{WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	return top, sub
}
