package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/nats"
	"github.com/wary-go/wary/redact"
)

// natsRetention is the max_age of probe streams, and so the horizon the
// driver must declare.
const natsRetention = 4 * 24 * time.Hour

// natsHarness probes NATS JetStream at the URL's server: each scenario
// gets a scratch stream, its durable pull consumer (max_ack_pending from
// the URL, 1000 by default) and its dead-letter stream, on a connection
// of its own, deleted when it ends.
func natsHarness(_ context.Context, u *url.URL, _ func(string) string) (conformance.Harness, func(), error) {
	maxAckPending := 1000
	if v := u.Query().Get("max_ack_pending"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < -1 {
			return conformance.Harness{}, nil, fmt.Errorf("probe: max_ack_pending is not an integer >= -1")
		}
		maxAckPending = n
	}
	server := &url.URL{Scheme: "nats", Host: u.Host, User: u.User}
	h := conformance.Harness{
		Name:              "probe " + redact.URL(u),
		Quiet:             time.Second,
		RedeliveryHorizon: natsRetention,
		Setup: func(ctx context.Context, t conformance.T, c conformance.Config) (*conformance.Fixture, error) {
			nc, err := natsgo.Connect(server.String())
			if err != nil {
				return nil, err
			}
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			if err != nil {
				return nil, err
			}
			name := "wary_probe_" + scratchName("s")[2:]
			// At least 3s: head-of-line holds a delivery through two Quiet
			// periods and must not see its lock expire meanwhile.
			lock := max(c.LockTimeout, 3*time.Second)
			if maxAckPending == 1 {
				lock = max(lock, 5*time.Second)
			}
			spec := nats.Spec{Stream: name, Subject: "wary.probe." + name, Consumer: "probe", AckWait: lock,
				MaxDeliver: max(c.DeliveryLimit, 1) + 1, MaxAckPending: maxAckPending, DuplicateWindow: c.DedupWindow, MaxAge: natsRetention}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = js.DeleteStream(ctx, spec.Stream)
				_ = js.DeleteStream(ctx, nats.DeadLetterStream(spec.Stream))
			})
			if err := nats.Declare(ctx, js, spec); err != nil {
				return nil, err
			}
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
	}
	return h, func() {}, nil
}
