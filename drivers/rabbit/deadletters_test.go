package rabbit_test

import (
	"errors"
	"net/url"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/redact"
)

// TestOpenDeadLettersURL: messages dead-lettered through a subscription
// opened by URL, on demand and by RabbitMQ's delivery limit, are read back
// with their reason through broker.OpenDeadLetters on the consumer's own
// URL, in either scheme and with or without the dead-letter exchange.
func TestOpenDeadLettersURL(t *testing.T) {
	ctx := ctxT(t)
	top, mux, subURL, sub := deadLetterSetup(t, "dlurl", "&prefetch=4", "poison", "limit")
	// "poison" is dead-lettered on demand; "limit" is nacked until
	// RabbitMQ dead-letters it (two deliveries).
	for settled := 0; settled < 3; settled++ {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d := ds[0]; d.Message.ID == "poison" {
			err = d.DeadLetter(ctx, "cannot parse")
		} else {
			err = d.Nack(ctx, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	dl, err := mux.OpenDeadLetters(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for len(got) < 2 {
		ds, err := dl.Receive(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got[d.Message.ID] = d.Message.Headers.Get(driver.HeaderDeadLetterReason)
			// Put back: the next readers see them too.
			if err := d.Nack(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = dl.Close()
	if got["poison"] != "cannot parse" || got["limit"] != "delivery_limit" {
		t.Fatalf("dead letters and reasons: %q", got)
	}

	// The same dead letters, from the amqp:// form of the URL, from one
	// without the (Topology's) dead-letter exchange, and from one naming
	// the dead-letter queue; they are acked by the last reader.
	amqpURL, _ := url.Parse(serverURL())
	amqpURL.RawQuery = url.Values{"queue": {top.Queue}, "delivery_limit": {"2"}, "dead_letter_exchange": {top.DeadLetterExchange()}}.Encode()
	for i, u := range []string{
		amqpURL.String(),
		"rabbit://" + top.Queue,
		"rabbit://" + top.Queue + "?dead_letter_exchange=" + top.DeadLetterExchange() + "&dead_letter_queue=" + top.DeadLetterQueue(),
	} {
		dl, err := mux.OpenDeadLetters(ctx, u)
		if err != nil {
			t.Fatalf("%s: %v", redact.String(u), err)
		}
		seen := map[string]bool{}
		for len(seen) < 2 {
			ds, err := dl.Receive(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if d.Message.Headers.Get(driver.HeaderDeadLetterReason) != got[d.Message.ID] {
					t.Errorf("%s: %s has reason %q, want %q", redact.String(u), d.Message.ID, d.Message.Headers.Get(driver.HeaderDeadLetterReason), got[d.Message.ID])
				}
				seen[d.Message.ID] = true
				if i == 2 {
					err = d.Ack(ctx)
				} else {
					err = d.Nack(ctx, 0)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		_ = dl.Close()
	}

	// The consumer's URL may carry dead_letter_queue.
	s2, err := mux.OpenSubscription(ctx, subURL+"&dead_letter_queue="+top.DeadLetterQueue())
	if err != nil {
		t.Fatalf("subscription URL with dead_letter_queue: %v", err)
	}
	_ = s2.Close()

	// Another dead-letter exchange than Topology's needs dead_letter_queue.
	if _, err := mux.OpenDeadLetters(ctx, "rabbit://"+top.Queue+"?dead_letter_exchange=elsewhere"); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("custom dead-letter exchange without dead_letter_queue: %v, want ErrInvalid", err)
	}
	if _, err := mux.OpenDeadLetters(ctx, "rabbit://"+uniqueName("missing")); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("a queue without a dead-letter queue: %v, want ErrNotFound", err)
	}
	if _, err := mux.OpenDeadLetters(ctx, "rabbit://"+top.Queue+"?colour=red"); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("unknown parameter: %v, want ErrInvalid", err)
	}
}

// rabbitMux opens rabbit:// and amqp:// URLs on the test server.
func rabbitMux() *broker.URLMux {
	mux := new(broker.URLMux)
	o := &rabbit.URLOpener{ServerURL: serverURL()}
	for _, s := range []string{rabbit.Scheme, rabbit.SchemeAMQP} {
		mux.RegisterTopic(s, o)
		mux.RegisterSubscription(s, o)
	}
	return mux
}

// deadLetterSetup declares a topology named after prefix with a delivery
// limit of 2 and a dead-letter queue, publishes ids to its exchange, and
// opens its subscription by URL (the subscription URL, with extra
// parameters appended); all are removed at cleanup.
func deadLetterSetup(t *testing.T, prefix, extra string, ids ...string) (rabbit.Topology, *broker.URLMux, string, *broker.Subscription) {
	t.Helper()
	ctx := ctxT(t)
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	name := uniqueName(prefix)
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name + ".billing", DeliveryLimit: 2, DeadLetter: true})
	mux := rabbitMux()
	subURL := "rabbit://" + top.Queue + "?delivery_limit=2&dead_letter_exchange=" + top.DeadLetterExchange() + extra
	topic, err := mux.OpenTopic(ctx, "rabbit://"+top.Exchange)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	sub, err := mux.OpenSubscription(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	for _, id := range ids {
		if err := topic.Publish(ctx, &broker.Message{ID: id, Body: []byte(id)}); err != nil {
			t.Fatal(err)
		}
	}
	return top, mux, subURL, sub
}
