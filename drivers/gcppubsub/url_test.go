package gcppubsub_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/broker/topology"
	_ "github.com/wary-go/wary/drivers/gcppubsub"
)

// TestURL opens topics, subscriptions and dead letters by URL, on the
// emulator at PUBSUB_EMULATOR_HOST, as the SDK finds it; malformed URLs
// are ErrInvalid without echoing values.
func TestURL(t *testing.T) {
	e := newTestEnv(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", e.srv.Addr)
	c := e.create(t, subSpec{AckDeadline: 10 * time.Second, MaxAttempts: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	top, err := broker.OpenTopic(ctx, "gcppubsub://"+c.Topic)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := broker.OpenSubscription(ctx, "gcppubsub://"+c.Sub+"?wait_time=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "u1", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var d *broker.Delivery
	for d == nil {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			d = ds[0]
		}
	}
	if err := d.DeadLetter(ctx, "bad order"); err != nil {
		t.Fatal(err)
	}
	dead, err := broker.OpenDeadLetters(ctx, "gcppubsub://"+c.Sub+"?wait_time=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	for {
		ds, err := dead.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			continue
		}
		if ds[0].Message.ID != "u1" || ds[0].Message.Headers.Get(driver.HeaderDeadLetterReason) != "bad order" {
			t.Fatalf("dead letter %q, headers %v", ds[0].Message.ID, ds[0].Message.Headers)
		}
		_ = ds[0].Ack(ctx)
		break
	}
	for _, u := range []string{
		"gcppubsub://projects/p/topics/t?secret=hunter2",
		"gcppubsub://projects/p/queues/t",
		"gcppubsub://projects/p/subscriptions/s?ordering=hunter2",
	} {
		_, err := broker.OpenTopic(ctx, u)
		if !errors.Is(err, broker.ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenTopic(%s): %v, want ErrInvalid without the value", u, err)
		}
	}
	if _, err := broker.OpenSubscription(ctx, "gcppubsub://projects/p/topics/t"); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("OpenSubscription of a topic URL: %v, want ErrInvalid", err)
	}
}

// TestTopologyURL: topology.PlanURL on a subscription URL plans the
// topic, the dead-letter topic and its subscription, and the
// subscription with the settings the URL states; Apply creates them; the
// same URL then opens a subscription whose capabilities are those
// settings, read back; a URL stating otherwise than the configuration is
// a Conflict in the plan and in the opened subscription's Source.
func TestTopologyURL(t *testing.T) {
	e := newTestEnv(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", e.srv.Addr)
	ctx := t.Context()
	u := "gcppubsub://projects/wary-test/subscriptions/billing?topic=orders&ordering=true&exactly_once=true&ack_deadline=30s&max_delivery_attempts=6"
	plan, err := topology.PlanURL(ctx, broker.DefaultURLMux(), u)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(plan.Missing()); n != 4 {
		t.Fatalf("missing %d entities, want 4: %+v", n, plan.Entities)
	}
	if err := plan.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := topology.PlanURL(ctx, broker.DefaultURLMux(), u)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Missing()) != 0 || again.Differs() {
		t.Fatalf("after Apply: %+v", again.Entities)
	}
	sub, err := broker.OpenSubscription(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	caps := sub.Capabilities()
	if caps.LockTimeout != 30*time.Second || caps.DeliveryLimit != 6 || caps.Ordering != capability.OrderMessageGroup || !strings.Contains(caps.Source.Read, "exactly-once delivery on") || len(caps.Source.Conflicts) != 0 {
		t.Fatalf("capabilities %s, Source %+v", caps, caps.Source)
	}
	other := strings.Replace(u, "ack_deadline=30s", "ack_deadline=60s", 1)
	p3, err := topology.PlanURL(ctx, broker.DefaultURLMux(), other)
	if err != nil {
		t.Fatal(err)
	}
	if !p3.Differs() {
		t.Fatalf("a URL stating another ack deadline: plan does not differ: %+v", p3.Entities)
	}
	s2, err := broker.OpenSubscription(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if cs := s2.Capabilities().Source.Conflicts; len(cs) != 1 || s2.Capabilities().LockTimeout != 30*time.Second {
		t.Fatalf("conflicts %+v, lock %s: want one, the configuration's 30s applying", cs, s2.Capabilities().LockTimeout)
	}
}
