package nats_test

import (
	"errors"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/nats"
)

// TestAs: the topic, the subscription and a delivery's message reach
// nats.go's own types, and an error the JetStream API's.
func TestAs(t *testing.T) {
	url := serverURL(t)
	nc, js := connect(t, url)
	spec := declare(t, js, nats.Spec{})
	ctx := ctxT(t)
	top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	var tjs jetstream.JetStream
	var conn *natsgo.Conn
	var subj nats.Subject
	if !top.As(&tjs) || tjs != js || !top.As(&conn) || conn != nc || !top.As(&subj) || string(subj) != spec.Subject || top.As(new(int)) {
		t.Fatalf("topic As")
	}
	if err := top.Publish(ctx, &broker.Message{ID: "as-1", Key: "k.1"}); err != nil {
		t.Fatal(err)
	}
	sub, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var cons jetstream.Consumer
	if !sub.As(&cons) || cons.CachedInfo().Name != spec.Consumer {
		t.Fatalf("subscription As")
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var m jetstream.Msg
	var msubj nats.Subject
	if !ds[0].Message.As(&m) || m.Headers().Get("Nats-Msg-Id") != "as-1" || !ds[0].Message.As(&msubj) || string(msubj) != spec.Subject+".k.1" {
		t.Fatalf("message As")
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	// An error of the JetStream API: errors.As reaches it through the
	// open's error (a missing consumer).
	_, err = nats.OpenSubscription(ctx, js, spec.Stream, "missing", nil)
	var apiErr *jetstream.APIError
	if !errors.Is(err, broker.ErrNotFound) || !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeConsumerNotFound {
		t.Fatalf("missing consumer: %v (APIError %+v)", err, apiErr)
	}
	// A publish to a stream deleted meanwhile: nobody answers, which is
	// retryable (a stream's leader may be moving) and certainly not sent.
	if err := js.DeleteStream(ctx, spec.Stream); err != nil {
		t.Fatal(err)
	}
	err = top.Publish(ctx, &broker.Message{ID: "as-2"})
	if !errors.Is(err, broker.ErrRetryable) || !errors.Is(err, broker.ErrNotSent) {
		t.Fatalf("publish to a deleted stream: %v, want ErrRetryable and ErrNotSent", err)
	}
}
