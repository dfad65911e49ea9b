package servicebus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// TestOpenDeadLettersURL: messages dead-lettered through a subscription
// opened by URL, on demand and by the delivery limit, are read back with
// their reason through broker.OpenDeadLetters on the consumer's own URL,
// for a queue and for a topic subscription.
func TestOpenDeadLettersURL(t *testing.T) {
	e := newEnv(t)
	mux := e.urlMux()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	q := e.createQueue(t, sbemu.Entity{DeliveryLimit: 2, Lock: 5 * time.Second})
	topicName, subPath := e.createSubscription(t, sbemu.Entity{DeliveryLimit: 2, Lock: 5 * time.Second})
	for _, c := range []struct{ topicURL, subURL string }{
		{"servicebus://" + q, "servicebus://" + q + "?receive_wait=200ms"},
		{"servicebus://" + topicName, "servicebus://" + subPath + "?receive_wait=200ms"},
	} {
		top, err := mux.OpenTopic(ctx, c.topicURL)
		if err != nil {
			t.Fatal(err)
		}
		defer top.Close()
		sub, err := mux.OpenSubscription(ctx, c.subURL)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		for _, id := range []string{"poison", "limit"} {
			if err := top.Publish(ctx, &broker.Message{ID: id, Body: []byte(id)}); err != nil {
				t.Fatal(err)
			}
		}
		// "poison" is dead-lettered on demand; "limit" is abandoned until
		// the service dead-letters it (two deliveries).
		for settled := 0; settled < 3; {
			ds, err := sub.Receive(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if d.Message.ID == "poison" {
					err = d.DeadLetter(ctx, "cannot parse")
				} else {
					err = d.Nack(ctx, 0)
				}
				if err != nil {
					t.Fatal(err)
				}
				settled++
			}
		}

		dl, err := mux.OpenDeadLetters(ctx, c.subURL)
		if err != nil {
			t.Fatal(err)
		}
		defer dl.Close()
		got := map[string]string{}
		for len(got) < 2 {
			ds, err := dl.Receive(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				got[d.Message.ID] = d.Message.Headers[driver.HeaderDeadLetterReason]
				if err := d.Ack(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got["poison"] != "cannot parse" || got["limit"] != "MaxDeliveryCountExceeded" {
			t.Fatalf("%s: dead letters and reasons: %q", c.subURL, got)
		}
	}

	for _, u := range []string{
		"servicebus://" + q + "/$DeadLetterQueue", // a dead-letter queue has none
		"servicebus://" + q + "?nope=1",
		"servicebus://" + topicName + "/Subscriptions", // not an entity path
	} {
		if _, err := mux.OpenDeadLetters(ctx, u); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", u, err)
		}
	}
	if _, err := mux.OpenDeadLetters(ctx, "servicebus://"+sbemu.UniqueName("missing")); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("missing queue: %v, want ErrNotFound", err)
	}
}

// urlMux opens servicebus:// URLs on e's emulator.
func (e *env) urlMux() *broker.URLMux {
	mux := new(broker.URLMux)
	o := &servicebus.URLOpener{ConnectionString: e.emu.ConnectionString, ClientOptions: e.emu.ClientOptions(), AdminOptions: e.emu.AdminClientOptions()}
	mux.RegisterTopic(servicebus.Scheme, o)
	mux.RegisterSubscription(servicebus.Scheme, o)
	return mux
}
