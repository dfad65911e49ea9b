package conformance

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

func init() {
	register(
		scenario{"lock-expiry-redelivers", func(c Capabilities, h *Harness) string {
			switch {
			case c.LockTimeout == capability.LockNone:
				return "the driver declares no lock (LockNone): a delivery is visible again at once, and Run refuses the subscription"
			case c.LockTimeout <= 0 && lockUnread(c):
				return "the driver could not read the lock's bound (Source.Unread: " + lockWhy(c) + "): there is no known lock timeout to wait out"
			case c.LockTimeout <= 0:
				return "the driver declares no LockTimeout (deliveries are held until settled or the consumer goes away)"
			}
			return needLockWait(c, h)
		}, lockExpiry},
		scenario{"ack-all-with-expired-lock", func(c Capabilities, h *Harness) string {
			switch {
			case c.LockTimeout <= 0 && lockUnread(c):
				return "the driver could not read the lock's bound: there is no known lock timeout to wait out"
			case c.LockTimeout <= 0:
				return "the driver declares no LockTimeout"
			}
			return needLockWait(c, h)
		}, ackAllExpired},
		scenario{"held-without-lock-timeout", func(c Capabilities, _ *Harness) string {
			switch {
			case c.LockTimeout > 0:
				return "the driver declares a LockTimeout; lock-expiry-redelivers checks it"
			case c.LockTimeout == capability.LockNone:
				return "the driver declares no lock (LockNone): a delivery is not held"
			}
			return ""
		}, heldWithoutLock},
		scenario{"lock-extension", func(c Capabilities, h *Harness) string {
			if !c.LockExtendable || c.LockTimeout <= 0 {
				return "the driver does not declare LockExtendable; the scenario checks ExtendLock fails with ErrUnsupported instead"
			}
			return needLockWait(c, h)
		}, lockExtension},
		scenario{"lock-extension-unsupported", func(c Capabilities, _ *Harness) string {
			if c.LockExtendable {
				return "the driver declares LockExtendable"
			}
			return ""
		}, lockExtensionUnsupported},
		scenario{"nack-delay", func(c Capabilities, h *Harness) string {
			if !c.NackDelay {
				return "the driver does not declare NackDelay"
			}
			return needWait(nackDelay(h), h, "the nack delay")
		}, nackWithDelay},
		scenario{"nack-delay-unsupported", func(c Capabilities, _ *Harness) string {
			if c.NackDelay {
				return "the driver declares NackDelay"
			}
			return ""
		}, nackDelayUnsupported},
		scenario{"delivery-limit-dead-letters", func(c Capabilities, _ *Harness) string {
			if c.DeliveryLimit <= 0 {
				return "the driver declares no DeliveryLimit"
			}
			return ""
		}, deliveryLimit},
		scenario{"dead-letter-with-reason", func(c Capabilities, _ *Harness) string {
			if !c.DeadLetter {
				return "the driver does not declare DeadLetter; the scenario checks DeadLetter fails with ErrUnsupported instead"
			}
			return ""
		}, deadLetter},
		scenario{"dead-letter-unsupported", func(c Capabilities, _ *Harness) string {
			if c.DeadLetter {
				return "the driver declares DeadLetter"
			}
			return ""
		}, deadLetterUnsupported},
		scenario{"crash-redelivers-unacked", needLockWait, crashRedelivers},
		scenario{"ack-model", needLockWait, ackModel},
	)
}

func nackDelay(h *Harness) time.Duration { return max(3*h.Quiet, 2*time.Second) }

// expired publishes m, receives it on s and lets the lock of that delivery,
// d1, expire.
func (e *env) expired(t T) (ctx context.Context, f *Fixture, s *broker.Subscription, m *broker.Message, d1 *broker.Delivery) {
	ctx, f = e.setup(t)
	s = e.sub(ctx, t, f)
	m = e.msg(t, "")
	publish(ctx, t, f, m)
	d1 = e.recv(ctx, t, s, 1)[0]
	e.wait(ctx, t, lockWait(e.caps))
	return ctx, f, s, m, d1
}

// lockExpiry: a delivery left unsettled past the lock timeout is delivered
// again (to any consumer), counted as a new attempt; a late settle of the
// old delivery does not lose the new one.
func lockExpiry(t T, e *env) {
	ctx, f, _, m, d1 := e.expired(t)
	s2 := e.sub(ctx, t, f)
	d2, _ := e.recvID(ctx, t, s2, m.ID)
	if !d2.Redelivered || e.caps.DeliveryCount && d2.Attempt != 2 {
		t.Fatalf("redelivery after lock expiry: attempt %d, redelivered %t", d2.Attempt, d2.Redelivered)
	}
	if err := d1.Ack(ctx); err != nil && !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("late ack of an expired delivery: %v; want nil or ErrLockLost", err)
	}
	ackAll(ctx, t, d2)
	e.expectNone(ctx, t, s2, "acked after redelivery")
}

// ackAllExpired: one driver call acking a delivery whose lock expired and
// the message's redelivery reports each alone: the late one nil or
// ErrLockLost, the redelivery acknowledged, and the message not delivered
// again.
func ackAllExpired(t T, e *env) {
	ctx, _, s, m, d1 := e.expired(t)
	d2, _ := e.recvID(ctx, t, s, m.ID)
	errs := broker.AckAll(ctx, []*broker.Delivery{d1, d2})
	if errs != nil && (errs[0] != nil && !errors.Is(errs[0], broker.ErrLockLost) || errs[1] != nil) {
		t.Fatalf("AckAll of an expired delivery and its redelivery: %v; want nil or ErrLockLost, then nil", errs)
	}
	e.expectNone(ctx, t, s, "acked after redelivery, in one call with the expired delivery")
}

// heldWithoutLock: with no lock timeout declared, an unsettled delivery
// stays with its consumer however long it takes.
func heldWithoutLock(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	e.wait(ctx, t, min(e.h.MaxWait, max(3*e.h.Quiet, 3*time.Second)))
	s2 := e.sub(ctx, t, f)
	e.expectNone(ctx, t, s2, "no lock timeout is declared, so an unsettled delivery must not move to another consumer")
	e.expectNone(ctx, t, s, "no lock timeout is declared, so an unsettled delivery must not be redelivered")
	ackAll(ctx, t, d)
}

// lockExtension: extending the lock keeps a slow delivery from being
// redelivered past the original timeout.
func lockExtension(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	if err := d.ExtendLock(ctx, 4*e.caps.LockTimeout); err != nil {
		t.Fatalf("extend lock: %v", err)
	}
	e.wait(ctx, t, lockWait(e.caps))
	s2 := e.sub(ctx, t, f)
	e.expectNone(ctx, t, s2, "an extended lock must hold the message past the original timeout")
	ackAll(ctx, t, d)
	if err := d.ExtendLock(ctx, e.caps.LockTimeout); !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("extending a settled delivery: %v, want ErrLockLost", err)
	}
}

func lockExtensionUnsupported(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	err := d.ExtendLock(ctx, time.Minute)
	mustIs(t, err, errors.ErrUnsupported)
	ackAll(ctx, t, d)
}

// nackWithDelay: a nacked message comes back no sooner than the delay.
func nackWithDelay(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	delay := nackDelay(e.h)
	if err := d.Nack(ctx, delay); err != nil {
		t.Fatalf("nack with delay: %v", err)
	}
	if !d.Settled() {
		t.Fatalf("delivery not settled after Nack")
	}
	e.expectNone(ctx, t, s, "a message nacked with a delay must not come back before the delay")
	e.wait(ctx, t, delay)
	d2, _ := e.recvID(ctx, t, s, m.ID)
	if !d2.Redelivered {
		t.Fatalf("delayed redelivery not flagged as redelivered")
	}
	ackAll(ctx, t, d2)
}

func nackDelayUnsupported(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	mustIs(t, d.Nack(ctx, time.Second), errors.ErrUnsupported)
	if d.Settled() {
		t.Fatalf("an unsupported nack settled the delivery")
	}
	ackAll(ctx, t, d)
}

// deliveryLimit: after DeliveryLimit deliveries the message is
// dead-lettered with a reason instead of delivered again.
func deliveryLimit(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	for i := 1; i <= e.caps.DeliveryLimit; i++ {
		d, _ := e.recvID(ctx, t, s, m.ID)
		if e.caps.DeliveryCount && d.Attempt != i {
			t.Fatalf("delivery %d reports attempt %d", i, d.Attempt)
		}
		if err := d.Nack(ctx, 0); err != nil {
			t.Fatalf("nack %d: %v", i, err)
		}
	}
	e.expectNone(ctx, t, s, "a message past its delivery limit must not be delivered again")
	if !e.caps.DeadLetter {
		return
	}
	dl := e.dlq(ctx, t, f)
	d, _ := e.recvID(ctx, t, dl, m.ID)
	if d.Message.Headers.Get(driver.HeaderDeadLetterReason) == "" {
		t.Fatalf("dead-lettered message has no %s header: %v", driver.HeaderDeadLetterReason, d.Message.Headers)
	}
	if string(d.Message.Body) != string(m.Body) {
		t.Fatalf("dead-lettered body %q, want %q", d.Message.Body, m.Body)
	}
	ackAll(ctx, t, d)
}

// deadLetter: DeadLetter moves the message to the dead-letter queue with
// its reason, and it is not delivered again on the subscription.
func deadLetter(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	reason := "cannot decode body: unexpected end of JSON input"
	if err := d.DeadLetter(ctx, reason); err != nil {
		t.Fatalf("dead-letter: %v", err)
	}
	dl := e.dlq(ctx, t, f)
	dd, _ := e.recvID(ctx, t, dl, m.ID)
	if got := dd.Message.Headers.Get(driver.HeaderDeadLetterReason); !strings.Contains(got, reason) {
		t.Fatalf("dead-letter reason %q, want it to contain %q", got, reason)
	}
	if string(dd.Message.Body) != string(m.Body) || dd.Message.Key != m.Key {
		t.Fatalf("dead-lettered message changed: key %q body %q", dd.Message.Key, dd.Message.Body)
	}
	ackAll(ctx, t, dd)
	e.expectNone(ctx, t, s, "a dead-lettered message must not be delivered again")
}

func deadLetterUnsupported(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "")
	publish(ctx, t, f, m)
	d := e.recv(ctx, t, s, 1)[0]
	mustIs(t, d.DeadLetter(ctx, "x"), errors.ErrUnsupported)
	ackAll(ctx, t, d)
}

// crashRedelivers: a consumer that closes (crashes) with unsettled
// deliveries loses nothing: another consumer gets them, flagged as
// redelivered.
func crashRedelivers(t T, e *env) {
	ctx, f := e.setup(t)
	s1, err := f.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*broker.Message
	for i := 0; i < 4; i++ {
		msgs = append(msgs, e.msg(t, "crash-"+string(rune('a'+i))))
	}
	publish(ctx, t, f, msgs...)
	got := e.recv(ctx, t, s1, 1)
	unsettled := got[0].Message.ID
	if err := s1.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := got[0].Ack(ctx); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("ack after close: %v, want ErrClosed", err)
	}
	e.wait(ctx, t, lockWait(e.caps))
	s2 := e.sub(ctx, t, f)
	seen := map[string]bool{}
	for len(seen) < len(msgs) {
		d := e.recv(ctx, t, s2, 1)[0]
		if d.Message.ID == unsettled && !d.Redelivered {
			t.Fatalf("the crashed consumer's message came back not flagged as redelivered")
		}
		seen[d.Message.ID] = true
		ackAll(ctx, t, d)
	}
}

// ackModel: a consumer acks the first and third of three messages of one
// scope and crashes holding the second. Per-message acks: only the second
// comes back. Cumulative acks: the second and third come back (the
// commit point cannot pass the second), the first does not.
func ackModel(t T, e *env) {
	ctx, f := e.setup(t)
	s1, err := f.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := "ack-model"
	m1, m2, m3 := e.msg(t, key), e.msg(t, key), e.msg(t, key)
	if e.caps.AckModel == capability.AckPerMessage && e.caps.HeadOfLine {
		// Distinct scopes, so that head-of-line does not hold m3 behind m2.
		m2.Key, m3.Key = key+"-2", key+"-3"
	}
	publish(ctx, t, f, m1, m2, m3)
	d1, _ := e.recvID(ctx, t, s1, m1.ID)
	ackAll(ctx, t, d1)
	d2, _ := e.recvID(ctx, t, s1, m2.ID)
	ackedThird := false
	// Head-of-line over the whole queue (a JetStream consumer with
	// max_ack_pending 1) holds m3 behind m2 whatever their keys.
	queueHOL := e.caps.HeadOfLine && e.caps.Ordering == capability.OrderQueue
	if !e.caps.HeadOfLine || e.caps.AckModel == capability.AckPerMessage && !queueHOL {
		d3, _ := e.recvID(ctx, t, s1, m3.ID)
		ackAll(ctx, t, d3)
		ackedThird = true
	}
	_ = d2
	if err := s1.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	e.wait(ctx, t, lockWait(e.caps))
	s2 := e.sub(ctx, t, f)
	want := map[string]bool{m2.ID: true}
	if e.caps.AckModel == capability.AckCumulative || !ackedThird {
		want[m3.ID] = true
	}
	got := map[string]bool{}
	for len(got) < len(want) {
		d := e.recv(ctx, t, s2, 1)[0]
		if !want[d.Message.ID] {
			t.Fatalf("ack model %s: after the crash got %s, want only %v (m1=%s m2=%s m3=%s)", e.caps.AckModel, d.Message.ID, want, m1.ID, m2.ID, m3.ID)
		}
		got[d.Message.ID] = true
		ackAll(ctx, t, d)
	}
	e.expectNone(ctx, t, s2, "ack model "+e.caps.AckModel.String()+": nothing else may come back")
}

// lockUnread reports whether the driver could not read the lock's bound
// from the broker (RabbitMQ's consumer_timeout): its LockTimeout is then
// not the broker's word.
func lockUnread(c Capabilities) bool {
	return c.Subscription.Source.IsUnread(capability.SettingLockTimeout)
}

// lockWhy is why the driver could not read the lock's bound.
func lockWhy(c Capabilities) string {
	for _, u := range c.Subscription.Source.Unread {
		if u.Setting == capability.SettingLockTimeout {
			return u.Why
		}
	}
	return ""
}
