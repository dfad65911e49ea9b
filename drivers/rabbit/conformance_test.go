package rabbit_test

import (
	"context"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/rabbit"
)

// harness runs the suite on a fresh exchange and quorum queue(s) per
// scenario. partitions > 1: partitioned by key.
//
// The queues have no message TTL and no length limit: a quorum queue keeps
// a message, delivered or not, until it is settled, so copies can arrive at
// any time and the redelivery horizon is unbounded.
func harness(t *testing.T, c *rabbit.Conn, name string, partitions int) conformance.Harness {
	return conformance.Harness{
		Name:              name,
		RedeliveryHorizon: capability.HorizonUnbounded,
		Setup: func(ctx context.Context, tb conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			q := uniqueName("conf")
			top, _ := declare(tb, c, rabbit.Topology{
				Exchange:       q,
				Queue:          q,
				Partitions:     partitions,
				DeliveryLimit:  cfg.DeliveryLimit,
				DeadLetter:     true,
				MaxMessageSize: 1 << 20,
			})
			topic, err := rabbit.OpenTopic(ctx, c, top, nil)
			if err != nil {
				return nil, err
			}
			so := &rabbit.SubscriptionOptions{NackDelay: true}
			return &conformance.Fixture{
				Topic: topic,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					return rabbit.OpenSubscription(ctx, c, top, so)
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return rabbit.OpenDeadLetters(ctx, c, top, nil)
				},
			}, nil
		},
		OpenMissingTopic: func(ctx context.Context) (*broker.Topic, error) {
			return rabbit.OpenTopic(ctx, c, rabbit.Topology{Exchange: uniqueName("missing")}, nil)
		},
		OpenMissingSubscription: func(ctx context.Context) (*broker.Subscription, error) {
			return rabbit.OpenSubscription(ctx, c, rabbit.Topology{Queue: uniqueName("missing")}, nil)
		},
	}
}

func TestConformanceQueue(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	conformance.Run(t, harness(t, c, "rabbit/quorum-sac", 0))
}

func TestConformancePartitioned(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	conformance.Run(t, harness(t, c, "rabbit/partitioned-4", 4))
}
