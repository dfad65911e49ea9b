package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestGroupClientChecks: OpenSubscription, OpenDeadLetters and
// OpenTransactSession refuse,
// with ErrInvalid carrying a *kafka.ClientError, a client not built with
// their options, one built for another group, one with topics of its own,
// one that already serves a subscription, and a transact session that
// does not read committed; a failed open leaves the client free for the
// next.
func TestGroupClientChecks(t *testing.T) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 1, "clientcheck")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(e.seeds...))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	newSession := func(opts ...kgo.Opt) *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(append(opts, kgo.SeedBrokers(e.seeds...))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	wantClientError := func(what string, err error) {
		t.Helper()
		var ce *kafka.ClientError
		if !errors.Is(err, broker.ErrInvalid) || !errors.As(err, &ce) || ce.Func == "" || ce.Problem == "" {
			t.Errorf("%s: %v (%T), want ErrInvalid with a *kafka.ClientError", what, err, err)
		}
	}
	for _, c := range []struct {
		name string
		cl   *kgo.Client
	}{
		{"plain client", newClient()},
		{"topic client", newClient(kafka.TopicOpts()...)},
		{"transact options", newClient(kafka.TransactOpts("g")...)},
		{"another group", newClient(kafka.SubscriptionOpts("other")...)},
		{"own topics", newClient(append(kafka.SubscriptionOpts("g"), kgo.ConsumeTopics(topic))...)},
		{"no client", nil},
	} {
		_, err := kafka.OpenSubscription(ctx, c.cl, topic, "g", nil)
		wantClientError("OpenSubscription, "+c.name, err)
		_, err = kafka.OpenDeadLetters(ctx, c.cl, topic, "g", nil)
		wantClientError("OpenDeadLetters, "+c.name, err)
	}

	// A failed open (an absent topic) leaves the client free; an open one
	// serves one subscription.
	cl := newClient(kafka.SubscriptionOpts("g")...)
	if _, err := kafka.OpenSubscription(ctx, cl, uniqueName("absent"), "g", nil); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("absent topic: %v, want ErrNotFound", err)
	}
	sub, err := kafka.OpenSubscription(ctx, cl, topic, "g", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kafka.OpenSubscription(ctx, cl, topic, "g", nil)
	wantClientError("second subscription on a client", err)
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	// The client is the program's: open after the subscription closed.
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("the program's client after the subscription closed: %v", err)
	}

	for _, c := range []struct {
		name string
		sess *kgo.GroupTransactSession
	}{
		{"subscription options", newSession(kafka.SubscriptionOpts("tx")...)},
		{"another group", newSession(kafka.TransactOpts("other")...)},
		{"read uncommitted", newSession(append(kafka.TransactOpts("tx"), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))...)},
		{"no session", nil},
	} {
		_, err := kafka.OpenTransactSession(ctx, c.sess, topic, "tx", nil)
		wantClientError("OpenTransactSession, "+c.name, err)
	}
}
