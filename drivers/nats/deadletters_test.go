package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/nats"
)

// TestLastDeliveryDeadLettered: a message whose lock expires on every
// delivery up to the limit is not left in the stream, never to be
// delivered again (what JetStream does at max_deliver): its next delivery
// is the driver's, which dead-letters it unseen, with the reason.
func TestLastDeliveryDeadLettered(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{AckWait: time.Second, MaxDeliver: 3})
	ctx := ctxT(t)
	top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if limit := sub.Capabilities().DeliveryLimit; limit != 2 {
		t.Fatalf("DeliveryLimit %d, want 2 (max_deliver 3, the last the driver's)", limit)
	}
	if err := top.Publish(ctx, &broker.Message{ID: "stuck", Key: "k", Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].Attempt != attempt {
			t.Fatalf("delivery %d reports attempt %d", attempt, ds[0].Attempt)
		}
		// left unsettled: its lock expires, as a crashed handler's would
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if ds, err := sub.Receive(rctx, 1); err == nil {
		t.Fatalf("a third delivery reached the caller: %s attempt %d", ds[0].Message.ID, ds[0].Attempt)
	}
	dl, err := nats.OpenDeadLetters(ctx, js, spec.Stream, spec.Consumer, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	ds, err := dl.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := ds[0].Message
	if m.ID != "stuck" || m.Key != "k" || string(m.Body) != "b" || !strings.Contains(m.Headers.Get(driver.HeaderDeadLetterReason), "lock expired") {
		t.Fatalf("dead letter: %+v", m)
	}
}

// TestDeadLetterCrashBetween: a failure between the dead-letter copy and
// the +TERM of the original leaves the message in both streams, never in
// neither; dead-lettering it again after it comes back writes a copy the
// dead-letter stream drops as a duplicate.
func TestDeadLetterCrashBetween(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{AckWait: time.Second})
	ctx := ctxT(t)
	top, err := nats.OpenTopic(ctx, js, spec.Stream, &nats.TopicOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "poison"}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	crash := errors.New("crash between copy and term")
	err = ds[0].DeadLetter(nats.WithTermHook(ctx, func(context.Context) error { return crash }), "bad")
	if !errors.Is(err, crash) {
		t.Fatalf("dead letter with the failpoint: %v", err)
	}
	// The original comes back after ack_wait; dead-letter it again.
	again, err := sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Message.ID != "poison" || again[0].Attempt != 2 {
		t.Fatalf("after the crash: %s attempt %d", again[0].Message.ID, again[0].Attempt)
	}
	if err := again[0].DeadLetter(ctx, "bad"); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, nats.DeadLetterStream(spec.Stream))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("the dead-letter stream holds %d copies, want 1 (the second a duplicate)", info.State.Msgs)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if ds, err := sub.Receive(rctx, 1); err == nil {
		t.Fatalf("terminated message delivered again: %s", ds[0].Message.ID)
	}
}
