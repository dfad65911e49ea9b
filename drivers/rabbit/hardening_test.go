package rabbit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/rabbit"
)

// A message whose AMQP content header (properties and headers, which
// travel in one frame) would exceed the connection's frame_max is refused
// before anything is sent, as ErrTooLarge and ErrNotSent, and not retried:
// RabbitMQ would close the whole connection (FRAME_ERROR), and a delivery
// held on the same Conn would lose its lock. Three ways to get there: one
// large header value, many headers, and a large key on a partitioned topic
// (the key travels in the wary-key header).
func TestHeaderFrameTooLarge(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("frame")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, Partitions: 2})
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
	checkBudget(t, c, topic.Capabilities().MaxHeaderSize)

	// A delivery held, unsettled, on the same Conn.
	if err := topic.Publish(ctx, &broker.Message{ID: "held", Key: "k", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	held, err := sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}

	var many broker.Headers
	for i := range 5000 {
		many = append(many, [2]string{fmt.Sprintf("h%04d", i), strings.Repeat("v", 16)}) // 21 bytes of name and value, 27 encoded
	}
	for _, tc := range []struct {
		name string
		m    *broker.Message
	}{
		{"200 KiB header value", &broker.Message{ID: "big-value", Key: "k", Headers: broker.Headers{{"h", strings.Repeat("v", 200<<10)}}}},
		{"5,000 headers", &broker.Message{ID: "many-headers", Key: "k", Headers: many}},
		{"1 MiB key", &broker.Message{ID: "big-key", Key: strings.Repeat("k", 1<<20)}},
	} {
		err := topic.Publish(ctx, tc.m)
		if !errors.Is(err, broker.ErrTooLarge) || !errors.Is(err, broker.ErrNotSent) {
			t.Errorf("%s: %v, want ErrTooLarge and ErrNotSent", tc.name, err)
		}
		if errors.Is(err, broker.ErrRetryable) {
			t.Errorf("%s: %v is retryable", tc.name, err)
		}
	}
	if n := c.Reconnects(); n != 0 {
		t.Fatalf("the connection dropped %d times", n)
	}
	// Nothing was sent: the partition queues hold no ready message.
	raw, err := c.Connection().Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range top.PartitionQueues() {
		st, err := raw.QueueDeclarePassive(q, true, false, false, false, amqp.Table{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Messages != 0 {
			t.Errorf("queue %s holds %d ready messages, want 0", q, st.Messages)
		}
	}
	// The held delivery kept its lock.
	if err := held[0].Ack(ctx); err != nil {
		t.Fatalf("ack of the held delivery: %v", err)
	}
	// And the topic still publishes.
	if err := topic.Publish(ctx, &broker.Message{ID: "after", Key: "k", Body: []byte("y")}); err != nil {
		t.Fatal(err)
	}
}

func checkBudget(t *testing.T, c *rabbit.Conn, topicBudget int) {
	t.Helper()
	fm := c.FrameMax()
	if fm <= 0 {
		t.Fatalf("FrameMax %d", fm)
	}
	if topicBudget <= 0 || topicBudget >= fm {
		t.Fatalf("MaxHeaderSize %d, frame_max %d", topicBudget, fm)
	}
}

// rawPublish publishes as a foreign (non-wary) producer would, with
// whatever headers it likes, and waits for the confirm.
func rawPublish(ctx context.Context, t *testing.T, exchange, key string, p amqp.Publishing) {
	t.Helper()
	conn, err := amqp.Dial(serverURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, p)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("raw publish not confirmed: %v %v", ok, err)
	}
}

// keyFor returns a key whose partition (of n) is p, or is not p.
func keyFor(n, p int, in bool) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("key-%d", i)
		m := &broker.Message{Key: k}
		if (keyPartition(m.Key, n) == p) == in {
			return k
		}
	}
}

// A foreign producer cannot, through the headers it sets, spoof a
// message's key into the wrong partition, make its first nack dead-letter
// it (a forged wary-prior-attempts or x-delivery-count), overflow its
// attempt count, or give it a dead-letter reason: the driver trusts only
// what RabbitMQ or wary itself set (see Trusted headers in the package
// doc).
func TestForeignHeadersNotTrusted(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	name := uniqueName("spoof")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, Partitions: 2, DeliveryLimit: 3, DeadLetter: true})
	sub, err := rabbit.OpenSubscription(ctx, c, top, &rabbit.SubscriptionOptions{NackDelay: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	receive := func(id string) *broker.Delivery {
		t.Helper()
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].Message.ID != id {
			t.Fatalf("received %s, want %s", ds[0].Message.ID, id)
		}
		return ds[0]
	}
	good, bad := keyFor(2, 0, true), keyFor(2, 0, false)

	// The key: accepted when it hashes to the partition the message is in,
	// not otherwise.
	rawPublish(ctx, t, top.Exchange, "0", amqp.Publishing{MessageId: "key-ok", Headers: amqp.Table{"wary-key": good}})
	if d := receive("key-ok"); d.Message.Key != good {
		t.Fatalf("key %q, want %q", d.Message.Key, good)
	} else if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	rawPublish(ctx, t, top.Exchange, "0", amqp.Publishing{MessageId: "key-spoofed", Headers: amqp.Table{"wary-key": bad}})
	if d := receive("key-spoofed"); d.Message.Key != "" {
		t.Fatalf("a key of another partition was accepted: %q", d.Message.Key)
	} else if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// Forged counts and a forged dead-letter history: a first delivery is
	// attempt 1, shows no reason, and its nack (with a delay, the path the
	// driver's own limit applies to) does not dead-letter it.
	forged := amqp.Table{
		"wary-key":                good,
		"wary-prior-attempts":     int64(math.MaxInt64),
		"x-delivery-count":        int64(math.MaxInt64),
		"x-death":                 []any{amqp.Table{"reason": "delivery_limit", "queue": top.Queue + ".0", "count": int64(5)}},
		"x-first-death-reason":    "delivery_limit",
		"wary-dead-letter-reason": "spoofed",
		"wary-not-before":         "9999",
		"user":                    "kept",
	}
	rawPublish(ctx, t, top.Exchange, "0", amqp.Publishing{MessageId: "forged", Headers: forged, Body: []byte("f")})
	d := receive("forged")
	if d.Attempt != 1 {
		t.Fatalf("forged counts: attempt %d, want 1", d.Attempt)
	}
	if len(d.Message.Headers) != 1 || d.Message.Headers.Get("user") != "kept" {
		t.Fatalf("headers %v: want only the user's", d.Message.Headers)
	}
	if err := d.Nack(ctx, 30*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// Back from the delay queue: the driver's own count, attempt 2.
	d = receive("forged")
	if d.Attempt != 2 || d.Message.Key != good || d.Message.Headers.Get(driver.HeaderDeadLetterReason) != "" {
		t.Fatalf("after a delayed nack: attempt %d key %q headers %v", d.Attempt, d.Message.Key, d.Message.Headers)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// A plain requeue: the broker's count, not the producer's.
	rawPublish(ctx, t, top.Exchange, "0", amqp.Publishing{MessageId: "requeued", Headers: amqp.Table{"wary-key": good, "x-delivery-count": int32(-7)}})
	for want := 1; want <= 2; want++ {
		d := receive("requeued")
		if d.Attempt != want {
			t.Fatalf("requeued: attempt %d, want %d", d.Attempt, want)
		}
		if want == 1 {
			if err := d.Nack(ctx, 0); err != nil {
				t.Fatal(err)
			}
		} else if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A dead-letter queue reports the reason of what reached it through its
	// dead-letter exchange, not what a producer claims elsewhere.
	dlq, err := rabbit.OpenDeadLetters(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	rawPublish(ctx, t, top.Exchange, "0", amqp.Publishing{MessageId: "to-dlq", Headers: amqp.Table{"wary-key": good}})
	d = receive("to-dlq")
	if err := d.DeadLetter(ctx, "handler gave up"); err != nil {
		t.Fatal(err)
	}
	ds, err := dlq.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := ds[0].Message.Headers.Get(driver.HeaderDeadLetterReason); ds[0].Message.ID != "to-dlq" || got != "handler gave up" || ds[0].Attempt != 2 {
		t.Fatalf("dead letter %s: reason %q attempt %d", ds[0].Message.ID, got, ds[0].Attempt)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// No verb of fmt prints a password held by a Conn or a URLOpener, alone
// or inside another struct.
func TestFormatNeverShowsPassword(t *testing.T) {
	const secret = "S3cr3tPW"
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	o := &rabbit.URLOpener{ServerURL: "amqp://user:" + secret + "@127.0.0.1:5672/"}
	type holder struct {
		Conn   *rabbit.Conn
		Opener *rabbit.URLOpener
	}
	h := holder{c, o}
	pw := "guest"
	for _, v := range []any{c, o, *o, h, &h} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			s := fmt.Sprintf(verb, v)
			if strings.Contains(s, secret) || strings.Contains(s, ":"+pw+"@") {
				t.Errorf("%s of %T shows the password: %s", verb, v, s)
			}
		}
	}
}

// A URL whose password cannot be told from the rest (the opaque form, or
// an unescaped "/", "?" or "#" in it) fails with ErrInvalid without
// showing any of the password, from Dial and from the URL opener.
func TestAmbiguousURLsInvalid(t *testing.T) {
	ctx := ctxT(t)
	const secret = "S3cr3tPW"
	for _, raw := range []string{
		"amqp://guest:S3cr/3tPW@127.0.0.1:1/",
		"amqp://guest:1234/S3cr3tPW@127.0.0.1:1/",
		"amqp:guest:S3cr3tPW@127.0.0.1:1",
		"amqp:guest:S3cr3tPW",
		"amqps://u:S3cr?3tPW@127.0.0.1:1/",
		"amqp://@/:S3cr3tPW@127.0.0.1:1/?exchange=x",
	} {
		_, err := rabbit.Dial(ctx, raw, nil)
		if err == nil || strings.Contains(err.Error(), "S3cr") || strings.Contains(err.Error(), "3tPW") {
			t.Errorf("Dial: %v", err)
		}
		u, perr := url.Parse(raw)
		if perr != nil {
			continue // broker.OpenTopic refuses it before any opener
		}
		_, err = (&rabbit.URLOpener{}).OpenTopicURL(ctx, u)
		if !errors.Is(err, broker.ErrInvalid) || strings.Contains(err.Error(), "S3cr") || strings.Contains(err.Error(), "3tPW") {
			t.Errorf("OpenTopicURL(%s): %v", strings.ReplaceAll(raw, secret, "xxx"), err)
		}
	}
}
