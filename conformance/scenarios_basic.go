package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/wary-go/wary/broker/driver"
	"strings"
	"time"

	"github.com/wary-go/wary/broker"
)

func init() {
	register(
		scenario{"round-trip-fidelity", always, roundTripFidelity},
		scenario{"ack", needLockWait, ackScenario},
		scenario{"ack-all", needLockWait, ackAllScenario},
		scenario{"nack-redelivers", always, nackRedelivers},
		scenario{"delivery-count", func(c Capabilities, _ *Harness) string {
			if !c.DeliveryCount {
				return "the driver does not declare DeliveryCount"
			}
			return ""
		}, deliveryCount},
		scenario{"double-settle-is-noop", always, doubleSettle},
		scenario{"key-required", always, keyRequired},
		scenario{"invalid-header-rejected", always, invalidHeader},
		scenario{"oversized-rejected", func(c Capabilities, _ *Harness) string {
			if c.MaxMessageSize <= 0 {
				return "the driver declares no MaxMessageSize"
			}
			return ""
		}, oversized},
	)
}

// roundTripFidelity: binary body (every byte value, not UTF-8), headers,
// ID and key come back unchanged; a first delivery says so.
func roundTripFidelity(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	body := make([]byte, 512)
	for i := range body {
		body[i] = byte(i)
	}
	m1 := e.msg(t, "key-α")
	m1.Body = body
	m1.Headers = driver.Headers{{"content-type", "application/octet-stream"}, {"unicode", "grüße ☃"}, {"empty", ""}}
	m2 := e.msg(t, "key-β")
	m2.Body = []byte{}
	m2.Headers = nil
	m3 := e.msg(t, "")
	m3.ID = "" // filled by Publish
	publish(ctx, t, f, m1, m2, m3)
	if m3.ID == "" {
		t.Fatalf("Publish did not fill the empty message ID")
	}
	want := map[string]*broker.Message{m1.ID: m1, m2.ID: m2, m3.ID: m3}
	// One at a time, acking each: on a head-of-line broker the keyless
	// message may share a scope with a keyed one and wait behind it.
	for len(want) > 0 {
		d := e.recv(ctx, t, s, 1)[0]
		w, ok := want[d.Message.ID]
		if !ok {
			t.Fatalf("unexpected message %q", d.Message.ID)
		}
		delete(want, d.Message.ID)
		if !bytes.Equal(d.Message.Body, w.Body) {
			t.Errorf("%s: body %q, want %q", w.ID, d.Message.Body, w.Body)
		}
		if d.Message.Key != w.Key {
			t.Errorf("%s: key %q, want %q", w.ID, d.Message.Key, w.Key)
		}
		for k, v := range w.Headers.All() {
			if got, ok := d.Message.Headers.Lookup(k); !ok || got != v {
				t.Errorf("%s: header %q = %q (present %t), want %q", w.ID, k, got, ok, v)
			}
		}
		for k := range d.Message.Headers.All() {
			if _, ok := w.Headers.Lookup(k); !ok && !strings.HasPrefix(k, "wary-") {
				t.Errorf("%s: unexpected header %q", w.ID, k)
			}
		}
		if d.Attempt != 1 || d.Redelivered {
			t.Errorf("%s: first delivery has attempt %d, redelivered %t", w.ID, d.Attempt, d.Redelivered)
		}
		ackAll(ctx, t, d)
	}
}

// ackScenario: an acked message is not delivered again, to this consumer
// or another, even after the lock timeout has passed.
func ackScenario(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	if d.Message.ID != m.ID {
		t.Fatalf("got %s, want %s", d.Message.ID, m.ID)
	}
	ackAll(ctx, t, d)
	if !d.Settled() {
		t.Fatalf("delivery not settled after Ack")
	}
	e.wait(ctx, t, lockWait(e.caps))
	s2 := e.sub(ctx, t, f)
	e.expectNone(ctx, t, s, "an acked message must not be delivered again")
	e.expectNone(ctx, t, s2, "an acked message must not be delivered to another consumer")
}

// ackAllScenario: broker.AckAll acknowledges several deliveries with one
// driver call (SendAcks with all their IDs), leaving out those settled
// before: none is delivered again. It acks what arrives, so that a driver
// that holds one unsettled delivery per scope (Kafka in order, RabbitMQ's
// prefetch) gets its next.
func ackAllScenario(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	var msgs []*broker.Message
	for i := range 3 { // a key each: no head-of-line wait between them
		msgs = append(msgs, e.msg(t, fmt.Sprint("ack-all-", i)))
	}
	publish(ctx, t, f, msgs...)
	ds := e.recv(ctx, t, s, 1)
	ackAll(ctx, t, ds...)
	for len(ds) < len(msgs) {
		got := recvWithin(ctx, t, s, len(msgs)-len(ds), 3*time.Second)
		if len(got) == 0 {
			t.Fatalf("received %d of %d deliveries", len(ds), len(msgs))
		}
		ds = append(ds, got...)
		if errs := broker.AckAll(ctx, ds); errs != nil {
			t.Fatalf("AckAll: %v", errors.Join(errs...))
		}
	}
	for _, d := range ds {
		if !d.Settled() {
			t.Fatalf("%s not settled after AckAll", d.Message.ID)
		}
	}
	e.wait(ctx, t, lockWait(e.caps))
	s2 := e.sub(ctx, t, f)
	e.expectNone(ctx, t, s, "a message acked by AckAll must not be delivered again")
	e.expectNone(ctx, t, s2, "a message acked by AckAll must not be delivered to another consumer")
}

// nackRedelivers: Nack(0) redelivers the message, flagged as a redelivery.
func nackRedelivers(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	if err := d.Nack(ctx, 0); err != nil {
		t.Fatalf("nack: %v", err)
	}
	d2, _ := e.recvID(ctx, t, s, m.ID)
	if !d2.Redelivered || d2.Attempt < 2 {
		t.Fatalf("redelivery reports attempt %d, redelivered %t; want attempt >= 2, redelivered", d2.Attempt, d2.Redelivered)
	}
	if !bytes.Equal(d2.Message.Body, m.Body) {
		t.Fatalf("redelivered body %q, want %q", d2.Message.Body, m.Body)
	}
	ackAll(ctx, t, d2)
}

// deliveryCount: the attempt number counts deliveries exactly: 1, 2, 3.
func deliveryCount(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	rounds := 3
	if e.caps.DeliveryLimit > 0 && e.caps.DeliveryLimit < rounds {
		rounds = e.caps.DeliveryLimit
	}
	for want := 1; want <= rounds; want++ {
		d, _ := e.recvID(ctx, t, s, m.ID)
		if d.Attempt != want {
			t.Fatalf("delivery %d reports attempt %d", want, d.Attempt)
		}
		if want == rounds {
			ackAll(ctx, t, d)
			break
		}
		if err := d.Nack(ctx, 0); err != nil {
			t.Fatalf("nack: %v", err)
		}
	}
}

// doubleSettle: a second Ack, a Nack or DeadLetter after Ack are no-ops
// that return nil and do not redeliver.
func doubleSettle(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	ackAll(ctx, t, d)
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("second ack: %v, want nil", err)
	}
	if err := d.Nack(ctx, 0); err != nil {
		t.Fatalf("nack after ack: %v, want nil", err)
	}
	if e.caps.DeadLetter {
		if err := d.DeadLetter(ctx, "late"); err != nil {
			t.Fatalf("dead-letter after ack: %v, want nil", err)
		}
	}
	e.expectNone(ctx, t, s, "settling again after an ack must not redeliver")
}

// keyRequired: where the driver declares KeyRequired, a message without a
// key fails at publish with ErrInvalid and nothing is sent; where it does
// not, such a message is delivered.
func keyRequired(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	m.Key = ""
	err := f.Topic.Publish(ctx, m)
	if e.caps.KeyRequired {
		mustIs(t, err, broker.ErrInvalid, broker.ErrNotSent)
		e.expectNone(ctx, t, s, "a rejected message must not be sent")
		return
	}
	if err != nil {
		t.Fatalf("publish without a key on a driver that does not require one: %v", err)
	}
	d, _ := e.recvID(ctx, t, s, m.ID)
	ackAll(ctx, t, d)
}

// invalidHeader: a non-UTF-8 header value fails at publish with
// ErrInvalid, nothing of the batch is sent, and later messages still flow.
func invalidHeader(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	good := e.msg(t, "")
	bad := e.msg(t, "")
	bad.Headers.Set("bad", string([]byte{0xff, 0xfe}))
	mustIs(t, f.Topic.Publish(ctx, good, bad), broker.ErrInvalid, broker.ErrNotSent)
	e.expectNone(ctx, t, s, "no message of a batch with an invalid one may be sent")
	next := e.msg(t, "")
	publish(ctx, t, f, next)
	d, _ := e.recvID(ctx, t, s, next.ID)
	ackAll(ctx, t, d)
}

// oversized: a message over MaxMessageSize fails with ErrTooLarge before
// anything is sent; a message at the limit goes through, and the stream is
// not stalled.
func oversized(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	big := e.msg(t, "")
	big.Headers = nil
	overhead := len(big.ID) + len(big.Key)
	big.Body = bytes.Repeat([]byte{'x'}, e.caps.MaxMessageSize-overhead+1)
	err := f.Topic.Publish(ctx, big)
	mustIs(t, err, broker.ErrTooLarge, broker.ErrNotSent)
	var be *broker.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %T is not a *broker.Error", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(e.caps.MaxMessageSize)) {
		t.Errorf("error %q does not name the limit", err)
	}
	fits := e.msg(t, "")
	fits.Headers = nil
	fits.Body = bytes.Repeat([]byte{'y'}, e.caps.MaxMessageSize-len(fits.ID)-len(fits.Key))
	publish(ctx, t, f, fits)
	d, _ := e.recvID(ctx, t, s, fits.ID)
	if len(d.Message.Body) != len(fits.Body) {
		t.Fatalf("message at the size limit arrived with %d bytes, want %d", len(d.Message.Body), len(fits.Body))
	}
	ackAll(ctx, t, d)
}

var _ = context.Background
