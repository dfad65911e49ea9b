package memory_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/memory"
)

// retention is the retention every harness topic is created with, and so
// the redelivery horizon the suite expects.
const retention = 72 * time.Hour

// harness runs the suite on one profile, on a fake clock: waiting for a
// lock or a dedup window to pass costs no real time. scope is the dedup
// scope of the profiles that dedup (zero: the default, the queue).
func harness(p memory.Profile, scope capability.DedupScope) conformance.Harness {
	clock := memory.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := memory.New(&memory.Options{Clock: clock})
	var n atomic.Int64
	return conformance.Harness{
		Name:              "memory/" + string(p),
		RedeliveryHorizon: retention,
		Setup: func(ctx context.Context, t conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			name := fmt.Sprintf("topic-%d", n.Add(1))
			tc := &memory.TopicConfig{Profile: p, LockTimeout: cfg.LockTimeout, DeliveryLimit: cfg.DeliveryLimit, MessageRetention: retention}
			if p == memory.SQSFIFO || p == memory.ServiceBus {
				tc.DedupWindow, tc.DedupScope = cfg.DedupWindow, scope
			}
			if p == memory.Partitioned {
				tc.LockTimeout = 0 // held until settled or revoked, as Kafka
			}
			if err := b.CreateTopic(name, tc); err != nil {
				return nil, err
			}
			if err := b.CreateSubscription(name, "sub"); err != nil {
				return nil, err
			}
			top, err := b.OpenTopic(name, nil)
			if err != nil {
				return nil, err
			}
			return &conformance.Fixture{
				Topic: top,
				Subscribe: func(context.Context) (*broker.Subscription, error) {
					return b.OpenSubscription(name, "sub", nil)
				},
				DeadLetters: func(context.Context) (*broker.Subscription, error) {
					return b.OpenDeadLetters(name, "sub", nil)
				},
			}, nil
		},
		Wait:    func(_ context.Context, d time.Duration) { clock.Advance(d) },
		Quiet:   100 * time.Millisecond,
		MaxWait: 24 * time.Hour,
		OpenMissingTopic: func(context.Context) (*broker.Topic, error) {
			return b.OpenTopic("no-such-topic", nil)
		},
		OpenMissingSubscription: func(context.Context) (*broker.Subscription, error) {
			return b.OpenSubscription("no-such-topic", "no-such-sub", nil)
		},
	}
}

func TestConformance(t *testing.T) {
	for _, p := range []memory.Profile{memory.Queue, memory.Partitioned, memory.SQSFIFO, memory.ServiceBus} {
		t.Run(string(p), func(t *testing.T) { conformance.Run(t, harness(p, 0)) })
	}
	t.Run("sqsfifo-dedup-per-group", func(t *testing.T) { conformance.Run(t, harness(memory.SQSFIFO, capability.DedupMessageGroup)) })
}
