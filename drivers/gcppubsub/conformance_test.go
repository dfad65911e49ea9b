package gcppubsub_test

import (
	"context"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/gcppubsub"
)

// confRetention is the message retention of every conformance
// subscription: the horizon the driver must read from it.
const confRetention = 2 * 24 * time.Hour

// TestConformance runs the suite on pstest, on fresh topics and
// subscriptions (with a dead-letter topic and its subscription) per
// scenario, in three modes: message ordering off, on, and exactly-once
// delivery on.
func TestConformance(t *testing.T) {
	for _, mode := range []struct {
		name        string
		ordering    bool
		exactlyOnce bool
	}{{"unordered", false, false}, {"ordered", true, false}, {"exactly-once", false, true}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newTestEnv(t)
			so := &gcppubsub.SubscriptionOptions{WaitTime: time.Second}
			conformance.Run(t, conformance.Harness{
				Name:              "gcppubsub/pstest/" + mode.name,
				Quiet:             time.Second,
				RedeliveryHorizon: confRetention,
				Setup: func(ctx context.Context, tb conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
					// Pub/Sub's dead-letter policy takes 5 to 100
					// attempts; pstest takes any, this harness keeps
					// Pub/Sub's range.
					c := e.create(tb, subSpec{
						AckDeadline: max(cfg.LockTimeout, 3*time.Second).Round(time.Second),
						Ordering:    mode.ordering,
						ExactlyOnce: mode.exactlyOnce,
						MaxAttempts: min(max(cfg.DeliveryLimit, 5), 100),
						Retention:   confRetention,
					})
					top, err := gcppubsub.OpenTopic(ctx, e.client, c.Topic, nil)
					if err != nil {
						return nil, err
					}
					return &conformance.Fixture{
						Topic: top,
						Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
							return gcppubsub.OpenSubscription(ctx, e.client, c.Sub, so)
						},
						DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
							return gcppubsub.OpenDeadLetters(ctx, e.client, c.Sub, so)
						},
					}, nil
				},
				OpenMissingTopic: func(ctx context.Context) (*broker.Topic, error) {
					return gcppubsub.OpenTopic(ctx, e.client, uniqueName("missing"), nil)
				},
				OpenMissingSubscription: func(ctx context.Context) (*broker.Subscription, error) {
					return gcppubsub.OpenSubscription(ctx, e.client, uniqueName("missing"), so)
				},
			})
		})
	}
}
