package servicebus_test

import (
	"context"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// harness runs the suite on fresh entities per scenario, created through
// the administration client (the emulator's, or the namespace's when
// WARY_SERVICEBUS_CONNECTION_STRING is set; for Microsoft's emulator
// WARY_SERVICEBUS_ADMIN_ENDPOINT names its administration API). Entities
// have no message TTL: a message stays until settled or dead-lettered, so
// the redelivery horizon is unbounded.
func harness(t *testing.T, e *env, name string, sessions, topicSub bool) conformance.Harness {
	h := conformance.Harness{
		Name:              name,
		RedeliveryHorizon: capability.HorizonUnbounded,
		Setup: func(ctx context.Context, tb conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			c := sbemu.Entity{Sessions: sessions, Lock: cfg.LockTimeout, DeliveryLimit: cfg.DeliveryLimit, Dedup: cfg.DedupWindow}
			if c.Lock > 0 && c.Lock < 5*time.Second {
				c.Lock = 5 * time.Second // the service's minimum; shorter locks expire under -race while a batch is acked
			}
			var sendTo, path string
			if topicSub {
				sendTo, path = e.createSubscription(tb, c)
			} else {
				sendTo = e.createQueue(tb, c)
				path = sendTo
			}
			// a client per scenario, closed with it: the SDK may replace its
			// connection during a scenario (after a cancelled accept, say),
			// and the suite counts the goroutines of a connection opened in a
			// scenario and never closed as leaked
			client := e.emu.NewClient(tb)
			// whether a topic's subscriptions require sessions is declared
			// to it (the key is then required)
			decl := servicebus.TopicProperties{RequiresSession: sessions}
			topic, err := servicebus.OpenTopic(ctx, client, sendTo, &servicebus.TopicOptions{Admin: e.admin, Entity: decl})
			if err != nil {
				return nil, err
			}
			so := &servicebus.SubscriptionOptions{Admin: e.admin, SessionIdle: 500 * time.Millisecond, ReceiveWait: 500 * time.Millisecond}
			return &conformance.Fixture{
				Topic: topic,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					return servicebus.OpenSubscription(ctx, client, path, so)
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return servicebus.OpenDeadLetters(ctx, client, path, so)
				},
			}, nil
		},
		OpenMissingTopic: func(ctx context.Context) (*broker.Topic, error) {
			return servicebus.OpenTopic(ctx, e.client, sbemu.UniqueName("missing"), &servicebus.TopicOptions{Admin: e.admin})
		},
		OpenMissingSubscription: func(ctx context.Context) (*broker.Subscription, error) {
			return servicebus.OpenSubscription(ctx, e.client, sbemu.UniqueName("missing"), &servicebus.SubscriptionOptions{Admin: e.admin})
		},
	}
	if e.emu.Real {
		h.FixedWaits = "the service's lock duration is at least 5s and its duplicate detection window at least 20s"
		h.MaxWait = 45 * time.Second
	}
	return h
}

func TestConformanceQueue(t *testing.T) {
	e := newEnv(t)
	conformance.Run(t, harness(t, e, "servicebus/queue", false, false))
}

func TestConformanceSessionQueue(t *testing.T) {
	e := newEnv(t)
	conformance.Run(t, harness(t, e, "servicebus/session-queue", true, false))
}

func TestConformanceTopicSubscription(t *testing.T) {
	e := newEnv(t)
	conformance.Run(t, harness(t, e, "servicebus/topic-subscription", false, true))
}
