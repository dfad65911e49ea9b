package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/drivers/gcppubsub/psemu"
)

// pubsubEmu serves pstest (psemu) for the test and points the SDK at it,
// as PUBSUB_EMULATOR_HOST does for every gcppubsub:// URL.
func pubsubEmu(t *testing.T) *psemu.Server {
	srv, err := psemu.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr)
	return srv
}

// handPubSub creates, as an operator would by hand, a topic and a pull
// subscription with a dead-letter policy (attempts) whose topic has a
// subscription, and returns the topic's and subscription's URLs.
func handPubSub(ctx context.Context, t *testing.T, srv *psemu.Server, name string, ps *pubsubpb.Subscription, attempts int32) (string, string) {
	t.Helper()
	c, err := srv.NewClient(ctx, "wary")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	full := func(kind, n string) string { return "projects/wary/" + kind + "/" + n }
	for _, tn := range []string{name, name + "-dead"} {
		if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: full("topics", tn)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: full("subscriptions", name+"-dead"), Topic: full("topics", name+"-dead")}); err != nil {
		t.Fatal(err)
	}
	ps.Name, ps.Topic = full("subscriptions", name), full("topics", name)
	if attempts > 0 {
		ps.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: full("topics", name+"-dead"), MaxDeliveryAttempts: attempts}
	}
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, ps); err != nil {
		t.Fatal(err)
	}
	return "gcppubsub://" + full("topics", name), "gcppubsub://" + full("subscriptions", name)
}

// TestPubSubDLQ: dead letters of a Pub/Sub subscription (pstest) are
// listed, replayed and discarded through the subscription's own URL: the
// dead-letter topic's subscription is found from its dead-letter policy.
func TestPubSubDLQ(t *testing.T) {
	srv := pubsubEmu(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	topURL, subURL := handPubSub(ctx, t, srv, unique("wary-cli"), &pubsubpb.Subscription{AckDeadlineSeconds: 10}, 5)
	w := newWary(t)
	top := mustOpenTopic(t, topURL)
	sub := mustOpenSub(t, subURL+"?wait_time=1s")
	dlqWalkthrough(t, w, top, topURL, sub, subURL+"?wait_time=1s", "3s")
}

// TestPubSubExplainReadsSubscription: explain states what a subscription
// created by hand holds, read from its configuration: ordering, the ack
// deadline, the dead-letter policy's limit.
func TestPubSubExplainReadsSubscription(t *testing.T) {
	srv := pubsubEmu(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	topURL, subURL := handPubSub(ctx, t, srv, unique("wary-explain"), &pubsubpb.Subscription{AckDeadlineSeconds: 45, EnableMessageOrdering: true, EnableExactlyOnceDelivery: true}, 7)
	w := newWary(t)
	r := w.run("explain", "--broker", topURL, "--subscription", subURL, "--outbox", "--inbox", "--consumer", "billing", "--ordered")
	t.Logf("exit %d\n%s\n%s", r.code, r.out, r.errout)
	r.has(t, "lock 45s", "dead-letters after 7 deliveries (native)", "exactly-once delivery on", "message ordering on")
}

// TestProbePubSub: the driver keeps what it declares on pstest, measured
// on scratch topics and subscriptions that probe creates and deletes.
func TestProbePubSub(t *testing.T) {
	pubsubEmu(t)
	w := newWary(t)
	r := w.want(cli.ExitOK, "probe", "gcppubsub://projects/wary/topics/scratch?ordering=true",
		"--only", "order-within-scope,head-of-line,delivery-limit-dead-letters,nack-redelivers")
	r.has(t, "limit 5 (native)", "every observation matches the declaration")
}

// TestTopologyPubSub: wary topology shows the topic, the dead-letter
// topic and its subscription, and the subscription missing; --apply
// creates them with the URL's settings; a second run finds them; explain
// reads them back; a URL stating another ack deadline differs and changes
// nothing.
func TestTopologyPubSub(t *testing.T) {
	pubsubEmu(t)
	w := newWary(t)
	u := "gcppubsub://projects/wary/subscriptions/billing?topic=orders&ordering=true&ack_deadline=45s&max_delivery_attempts=5"
	r := w.want(cli.ExitFinding, "topology", u)
	r.has(t, "missing  topic", "missing  dead-letter topic", "ack deadline 45s", "dead-letter policy after 5 delivery attempts", "4 missing")
	w.want(cli.ExitOK, "topology", u, "--apply").has(t, "declared  subscription")
	w.want(cli.ExitOK, "topology", u).has(t, "exists", "all exist as the URL states")
	r = w.want(cli.ExitOK, "explain", "--broker", "gcppubsub://projects/wary/topics/orders", "--subscription", u, "--outbox", "--inbox", "--consumer", "billing", "--ordered")
	r.has(t, "dead-letters after 5 deliveries (native)", "lock 45s")
	other := strings.Replace(u, "ack_deadline=45s", "ack_deadline=60s", 1)
	r = w.want(cli.ExitFinding, "topology", other, "--apply")
	r.has(t, "DIFFERS", "ack_deadline=1m0s in the URL", "left as it is")
}
