package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/nats"
)

// confRetention is the max_age of every conformance stream: the horizon
// the driver must read.
const confRetention = 48 * time.Hour

// TestConformance runs the conformance suite on the local server, each
// scenario on a stream (and dead-letter stream) of its own: the
// consumer's ack_wait is the scenario's lock timeout, its max_deliver one
// more than the delivery limit, the stream's duplicate_window the dedup
// window.
func TestConformance(t *testing.T) {
	url := serverURL(t)
	run(t, url, "nats", 1000)
}

func run(t *testing.T, url, name string, maxAckPending int) {
	_, js := connect(t, url)
	// Its first request starts the connection's reply subscription, a
	// goroutine that must predate the suite's leak check.
	if _, err := js.AccountInfo(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	conformance.Run(t, conformance.Harness{
		Name:              name,
		Quiet:             time.Second,
		RedeliveryHorizon: confRetention,
		Setup: func(ctx context.Context, tb conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			// the head-of-line scenario holds a delivery through two
			// Quiet periods (2s): the lock must outlast them.
			lock := max(cfg.LockTimeout, 3*time.Second)
			// A connection per fixture, closed with it: nats.go starts
			// goroutines of a connection lazily (the async PubAck
			// listener), which the suite's leak check would count.
			_, js := connect(tb, url)
			spec := declare(tb, js, nats.Spec{
				AckWait: lock, MaxDeliver: max(cfg.DeliveryLimit, 1) + 1, MaxAckPending: maxAckPending,
				DuplicateWindow: cfg.DedupWindow, MaxAge: confRetention,
			})
			top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
			if err != nil {
				return nil, err
			}
			so := &nats.SubscriptionOptions{Subject: spec.Subject}
			return &conformance.Fixture{
				Topic: top,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					return nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, so)
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return nats.OpenDeadLetters(ctx, js, spec.Stream, spec.Consumer, so)
				},
			}, nil
		},
		OpenMissingTopic: func(ctx context.Context) (*broker.Topic, error) {
			return nats.OpenTopic(ctx, js, uniqueName("missing"), nil)
		},
		OpenMissingSubscription: func(ctx context.Context) (*broker.Subscription, error) {
			return nats.OpenSubscription(ctx, js, uniqueName("missing"), "c", nil)
		},
	})
}
