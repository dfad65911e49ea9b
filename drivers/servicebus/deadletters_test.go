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
				got[d.Message.ID] = d.Message.Headers.Get(driver.HeaderDeadLetterReason)
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

// TestOpenDeadLetters: servicebus.OpenDeadLetters, given the consumer's
// own entity (a queue, or a topic subscription that requires sessions,
// whose dead-letter queue has none), reads the messages dead-lettered
// there with their reason, as a subscription that dead-letters nothing
// further. It refuses an entity that names a dead-letter queue already,
// a malformed entity and a nil client (ErrInvalid), and, with Admin, a
// missing entity (ErrNotFound).
func TestOpenDeadLetters(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	q := e.createQueue(t, sbemu.Entity{})
	topicName, subPath := e.createSubscription(t, sbemu.Entity{Sessions: true})
	so := &servicebus.SubscriptionOptions{Admin: e.admin, ReceiveWait: 200 * time.Millisecond}
	// receive waits for one delivery from s.
	receive := func(what string, s *broker.Subscription) *broker.Delivery {
		t.Helper()
		for {
			ds, err := s.Receive(ctx, 1)
			if err != nil {
				t.Fatalf("%s: receive: %v", what, err)
			}
			if len(ds) == 1 {
				return ds[0]
			}
		}
	}
	for _, c := range []struct {
		send, entity string
		sessions     bool
	}{{q, q, false}, {topicName, subPath, true}} {
		// A topic does not know that its subscription requires sessions:
		// that is declared to it.
		top, err := servicebus.OpenTopic(ctx, e.client, c.send, &servicebus.TopicOptions{Admin: e.admin, Entity: servicebus.TopicProperties{RequiresSession: c.sessions}})
		if err != nil {
			t.Fatal(err)
		}
		defer top.Close()
		if err := top.Publish(ctx, &broker.Message{ID: "poison", Key: "k", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		sub, err := servicebus.OpenSubscription(ctx, e.client, c.entity, so)
		if err != nil {
			t.Fatal(err)
		}
		if err := receive(c.entity, sub).DeadLetter(ctx, "cannot parse"); err != nil {
			t.Fatal(err)
		}
		sub.Close()

		dl, err := servicebus.OpenDeadLetters(ctx, e.client, c.entity, so)
		if err != nil {
			t.Fatal(err)
		}
		if caps := dl.Capabilities(); caps.DeadLetter || caps.DeliveryLimit != 0 {
			t.Errorf("%s: dead letters' capabilities %+v, want no dead-lettering and no limit", c.entity, caps)
		}
		d := receive(c.entity+" dead letters", dl)
		if m := d.Message; m.ID != "poison" || m.Headers.Get(driver.HeaderDeadLetterReason) != "cannot parse" {
			t.Errorf("%s: dead letter %q %v, want poison with its reason", c.entity, m.ID, m.Headers)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		dl.Close()
	}

	for _, bad := range []string{q + "/$DeadLetterQueue", subPath + "/$deadletterqueue", topicName + "/Subscriptions", ""} {
		if _, err := servicebus.OpenDeadLetters(ctx, e.client, bad, so); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := servicebus.OpenDeadLetters(ctx, nil, q, so); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("nil client: %v, want ErrInvalid", err)
	}
	if _, err := servicebus.OpenDeadLetters(ctx, e.client, sbemu.UniqueName("missing"), so); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("missing queue: %v, want ErrNotFound", err)
	}
}
