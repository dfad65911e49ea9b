package rabbit_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/rabbit"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// unroutableTopic is a topic on a partitioned exchange of which only
// partitions 0..3 are bound while the topic thinks there are 8, so that
// some keys route nowhere; closed when t ends.
func unroutableTopic(t *testing.T, name string, opts *rabbit.TopicOptions) *broker.Topic {
	t.Helper()
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	top, _ := declare(t, c, rabbit.Topology{Exchange: uniqueName(name), Queue: uniqueName(name), Partitions: 4})
	eight := top
	eight.Partitions = 8
	topic, err := rabbit.OpenTopic(ctxT(t), c, eight, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	return topic
}

// An unroutable message (no queue bound) fails with ErrNotFound, not sent;
// the topic keeps working.
func TestUnroutable(t *testing.T) {
	ctx := ctxT(t)
	topic := unroutableTopic(t, "unroutable", nil)
	var routed, unroutable int
	for i := 0; i < 16; i++ {
		err := topic.Publish(ctx, &broker.Message{Key: string(rune('a' + i)), Body: []byte("x")})
		switch {
		case err == nil:
			routed++
		case errors.Is(err, broker.ErrNotFound) && errors.Is(err, broker.ErrNotSent):
			unroutable++
			var r amqp.Return
			if !topic.ErrorAs(err, &r) || r.ReplyCode != amqp.NoRoute {
				t.Errorf("ErrorAs(*amqp.Return): %+v", r)
			}
		default:
			t.Fatalf("publish: %v", err)
		}
	}
	if routed == 0 || unroutable == 0 {
		t.Fatalf("routed %d, unroutable %d: want some of each", routed, unroutable)
	}
	// The same 16 in one Publish: each message's own outcome, the routed
	// ones accepted, the call as a whole maybe sent.
	msgs := make([]*broker.Message, 16)
	for i := range msgs {
		msgs[i] = &broker.Message{Key: string(rune('a' + i)), Body: []byte("x")}
	}
	err := topic.Publish(ctx, msgs...)
	var be *broker.Error
	if !errors.As(err, &be) || len(be.Messages) != 16 || !errors.Is(err, broker.ErrMaybeSent) || !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("batch: %v, want maybe sent, not found, with 16 Messages", err)
	}
	n := 0
	for i, m := range be.Messages {
		if m == nil {
			n++
		} else if !errors.Is(m, broker.ErrNotFound) || !errors.Is(m, broker.ErrNotSent) {
			t.Errorf("message %d: %v, want not found, not sent", i, m)
		}
	}
	if n != routed {
		t.Errorf("%d messages of the batch accepted, want the %d routed alone", n, routed)
	}
}

// Nacks with a delay count attempts across the delay queue, and the
// delivery limit still applies: the message ends in the dead-letter queue
// with reason delivery_limit after DeliveryLimit deliveries.
func TestDelayedNacksKeepCountAndLimit(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("delaylimit")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, Partitions: 2, DeliveryLimit: 3, DeadLetter: true})
	topic, err := rabbit.OpenTopic(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	sub, err := rabbit.OpenSubscription(ctx, c, top, &rabbit.SubscriptionOptions{NackDelay: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	m := &broker.Message{ID: "delayed-1", Key: "k-1", Body: []byte("b"), Headers: broker.Headers{{"h", "v"}}}
	if err := topic.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 3; want++ {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		d := ds[0]
		if d.Message.ID != m.ID || d.Attempt != want || d.Message.Key != m.Key || d.Message.Headers.Get("h") != "v" || len(d.Message.Headers) != 1 {
			t.Fatalf("delivery %d: id %s attempt %d key %q headers %v", want, d.Message.ID, d.Attempt, d.Message.Key, d.Message.Headers)
		}
		if err := d.Nack(ctx, 30*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if ds, err := sub.Receive(rctx, 1); err == nil {
		t.Fatalf("delivered past the limit: %s attempt %d", ds[0].Message.ID, ds[0].Attempt)
	}
	dlq, err := rabbit.OpenDeadLetters(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	ds, err := dlq.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := ds[0].Message.Headers.Get(driver.HeaderDeadLetterReason); got != "delivery_limit" || ds[0].Message.Key != m.Key {
		t.Fatalf("dead letter: reason %q key %q", got, ds[0].Message.Key)
	}
	_ = ds[0].Ack(ctx)
}

// The broker's own limit: a consumer that crashes (closes) with the
// message counts as a delivery, and after DeliveryLimit of them RabbitMQ
// dead-letters it with reason delivery_limit.
func TestNativeLimitOnCrashes(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("crashlimit")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, DeliveryLimit: 2, DeadLetter: true})
	topic, err := rabbit.OpenTopic(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	if err := topic.Publish(ctx, &broker.Message{ID: "poison", Body: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ {
		sub, err := rabbit.OpenSubscription(ctx, c, top, &rabbit.SubscriptionOptions{NackDelay: true})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].Attempt != want {
			t.Fatalf("attempt %d, want %d", ds[0].Attempt, want)
		}
		_ = sub.Close() // crash: no settle
	}
	dlq, err := rabbit.OpenDeadLetters(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	ds, err := dlq.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := ds[0].Message.Headers.Get(driver.HeaderDeadLetterReason); got != "delivery_limit" {
		t.Fatalf("reason %q", got)
	}
	_ = ds[0].Ack(ctx)
}

// Passwords never show: not in Conn.String, not in dial errors, not in URL
// errors; unknown URL parameters are rejected.
func TestCredentialsAndURLs(t *testing.T) {
	ctx := ctxT(t)
	const secret = "s3cr3t-pa55"
	_, err := rabbit.Dial(ctx, "amqp://user:"+secret+"@127.0.0.1:1/", nil)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("dial error shows the password or is nil: %v", err)
	}
	_, err = rabbit.Dial(ctx, "amqp://user:"+secret+"@127.0.0.1:1/%zz", nil)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("URL error shows the password or is nil: %v", err)
	}
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	if u, _ := url.Parse(serverURL()); u.User != nil {
		if pw, ok := u.User.Password(); ok && strings.Contains(c.String(), ":"+pw+"@") {
			t.Fatalf("Conn.String shows the password: %s", c)
		}
	}

	for _, bad := range []string{
		"amqp://user:" + secret + "@127.0.0.1:1/?exchange=x&bogus=1",
		"rabbit://x?partitions=-1",
		"amqp://user:" + secret + "@127.0.0.1:1/?queue=q&prefetch=lots",
	} {
		_, err := broker.OpenTopic(ctx, bad)
		if bad[:4] == "amqp" && strings.Contains(bad, "queue=") {
			_, err = broker.OpenSubscription(ctx, bad)
		}
		if !errors.Is(err, broker.ErrInvalid) || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: %v, want ErrInvalid without the password", strings.ReplaceAll(bad, secret, "xxx"), err)
		}
	}

	name := uniqueName("url")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, Partitions: 2})
	u, _ := url.Parse(serverURL())
	q := url.Values{"exchange": {top.Exchange}, "partitions": {"2"}, "heartbeat": {"5"}}
	u.RawQuery = q.Encode()
	topic, err := broker.OpenTopic(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	t.Setenv(rabbit.ServerURLEnv, serverURL())
	sub, err := broker.OpenSubscription(ctx, "rabbit://"+top.Queue+"?partitions=2&prefetch=4")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if sub.Capabilities().Ordering != capability.OrderPartition || !strings.Contains(topic.Capabilities().OrderingKey, "partition") {
		t.Fatalf("ordering %s, key %s", sub.Capabilities().Ordering, topic.Capabilities().OrderingKey)
	}
	if err := topic.Publish(ctx, &broker.Message{ID: "u1", Key: "k", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil || ds[0].Message.ID != "u1" || ds[0].Message.Key != "k" {
		t.Fatalf("receive: %v", err)
	}
	_ = ds[0].Ack(ctx)
	if _, err := broker.OpenSubscription(ctx, "rabbit://"+uniqueName("missing")); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("missing queue by URL: %v", err)
	}
}
