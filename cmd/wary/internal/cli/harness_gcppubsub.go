package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/gcppubsub"
	"github.com/wary-go/wary/redact"
)

// pubsubRetention is the message retention of probe subscriptions, and so
// the horizon the driver must declare.
const pubsubRetention = 2 * 24 * time.Hour

// pubsubHarness probes Google Cloud Pub/Sub in the project of
// gcppubsub://projects/P/... (the emulator at $PUBSUB_EMULATOR_HOST when
// set, Application Default Credentials otherwise): each scenario gets a
// scratch topic and pull subscription, with a dead-letter topic and its
// subscription, deleted when it ends. ordering=true and exactly_once=true
// set those on the scratch subscriptions.
func pubsubHarness(ctx context.Context, u *url.URL, _ func(string) string) (conformance.Harness, func(), error) {
	parts := strings.Split(strings.Trim(u.Host+u.Path, "/"), "/")
	if len(parts) < 2 || parts[0] != "projects" || parts[1] == "" {
		return conformance.Harness{}, nil, fmt.Errorf("probe: %s names no project (gcppubsub://projects/PROJECT/...)", redact.URL(u))
	}
	project := parts[1]
	q := u.Query()
	flag := func(name string) (bool, error) {
		if !q.Has(name) {
			return false, nil
		}
		b, err := strconv.ParseBool(q.Get(name))
		if err != nil {
			return false, fmt.Errorf("probe: %s is not a boolean", name)
		}
		return b, nil
	}
	ordering, err := flag("ordering")
	if err != nil {
		return conformance.Harness{}, nil, err
	}
	exactlyOnce, err := flag("exactly_once")
	if err != nil {
		return conformance.Harness{}, nil, err
	}
	client, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return conformance.Harness{}, nil, fmt.Errorf("probe: Pub/Sub client: %w", err)
	}
	name := func(kind, n string) string { return "projects/" + project + "/" + kind + "/" + n }
	cleanup := func(t conformance.T, f func(context.Context) error) {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = f(ctx)
		})
	}
	create := func(ctx context.Context, t conformance.T, topic, sub string, ps *pubsubpb.Subscription) error {
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
			return err
		}
		cleanup(t, func(ctx context.Context) error {
			return client.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: topic})
		})
		ps.Name, ps.Topic = sub, topic
		if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, ps); err != nil {
			return err
		}
		cleanup(t, func(ctx context.Context) error {
			return client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: sub})
		})
		return nil
	}
	so := &gcppubsub.SubscriptionOptions{WaitTime: time.Second}
	h := conformance.Harness{
		Name:              "probe " + redact.URL(u),
		Quiet:             time.Second,
		RedeliveryHorizon: pubsubRetention,
		Setup: func(ctx context.Context, t conformance.T, c conformance.Config) (*conformance.Fixture, error) {
			n := scratchName("wary-probe")
			dead := name("topics", n+"-dead")
			if err := create(ctx, t, dead, name("subscriptions", n+"-dead"), &pubsubpb.Subscription{}); err != nil {
				return nil, err
			}
			// Pub/Sub's ack deadline is 10 to 600 s, its delivery
			// attempts 5 to 100.
			sub := name("subscriptions", n)
			err := create(ctx, t, name("topics", n), sub, &pubsubpb.Subscription{
				AckDeadlineSeconds:        int32(max(c.LockTimeout, 10*time.Second) / time.Second),
				EnableMessageOrdering:     ordering,
				EnableExactlyOnceDelivery: exactlyOnce,
				MessageRetentionDuration:  durationpb.New(pubsubRetention),
				DeadLetterPolicy:          &pubsubpb.DeadLetterPolicy{DeadLetterTopic: dead, MaxDeliveryAttempts: int32(min(max(c.DeliveryLimit, 5), 100))},
			})
			if err != nil {
				return nil, err
			}
			top, err := gcppubsub.OpenTopic(ctx, client, name("topics", n), nil)
			if err != nil {
				return nil, err
			}
			return &conformance.Fixture{
				Topic: top,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					return gcppubsub.OpenSubscription(ctx, client, sub, so)
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return gcppubsub.OpenDeadLetters(ctx, client, sub, so)
				},
			}, nil
		},
	}
	return h, func() { _ = client.Close() }, nil
}
