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

func run[P interface {
	conformance.T
	Run(name string, f func(t P)) bool
}](t P, url, name string, maxAckPending int) {
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
			if maxAckPending == 1 {
				// ack-all holds a delivery while it waits 3s for one that
				// head-of-line over the whole consumer holds back.
				lock = max(lock, 5*time.Second)
			}
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

// TestConformanceOrdered runs the order scenarios on consumers with
// max_ack_pending 1, which the driver declares OrderQueue with
// head-of-line: the server has one message of the consumer in flight at a
// time, so every key (a subject SUBJECT.KEY) is delivered in publish
// order, and the whole consumer too. per-key-serial-handler is not run:
// it proves that keys are handled in parallel, which one message in
// flight rules out.
func TestConformanceOrdered(t *testing.T) {
	url := serverURL(t)
	run(without{t, map[string]string{
		"per-key-serial-handler": "max_ack_pending 1 has one message of the consumer in flight: keys are not handled in parallel (TestConformance runs it, on max_ack_pending 1000)",
	}}, url, "nats/max_ack_pending=1", 1)
}

// without is a *testing.T whose Run skips the subtests it names, with
// the reason.
type without struct {
	*testing.T
	skip map[string]string
}

func (w without) Run(name string, f func(t without)) bool {
	return w.T.Run(name, func(t *testing.T) {
		if why, ok := w.skip[name]; ok {
			t.Skip("not applicable: " + why)
		}
		f(without{t, w.skip})
	})
}
