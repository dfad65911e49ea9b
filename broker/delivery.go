package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wary-go/wary/broker/driver"
)

// Delivery is one delivery of a message, and the means to settle it once,
// with Ack, Nack or DeadLetter; settling again returns nil. A failed settle
// leaves it unsettled; one matching ErrLockLost means the broker took the
// message back and will deliver it again.
type Delivery struct {
	// Message is the message delivered.
	Message *Message
	// Attempt is the 1-based delivery count (see
	// capability.Subscription.DeliveryCount for whether the broker counts exactly).
	Attempt int
	// Redelivered reports whether the broker delivered the message before.
	Redelivered bool
	// PublishTime is when the broker accepted the message, if it says.
	PublishTime time.Time

	sub *Subscription
	// backoff is the RunOptions.Backoff of the Run that handed the
	// delivery out, else nil (the default policy).
	backoff *Backoff
	// ackID holds the delivery's driver.AckID; settling passes ackID[:]
	// (under mu), so a settle allocates no slice.
	ackID [1]driver.AckID

	mu        sync.Mutex
	settled   bool
	ackFailed bool // an Ack was sent and failed: the handler meant to ack

	// ackAllAt is AckAll's mark, under sub.ackMu (ackall.go). (int32,
	// beside the flags: a Delivery and its Message fit 192 bytes.)
	ackAllAt int32
}

// NewDetachedDelivery returns a delivery of m that belongs to no
// subscription, for a Handler called outside a broker (a replay, a test):
// settling it only marks it settled. attempt below 1 means 1.
func NewDetachedDelivery(m *Message, attempt int) *Delivery {
	if attempt < 1 {
		attempt = 1
	}
	return &Delivery{Message: m, Attempt: attempt, Redelivered: attempt > 1}
}

// Detached reports whether d belongs to no subscription (see
// NewDetachedDelivery).
func (d *Delivery) Detached() bool { return d.sub == nil }

// Settled reports whether the delivery was settled.
func (d *Delivery) Settled() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.settled
}

// Ack acknowledges the delivery: the broker will not deliver it again (with
// cumulative acks, once every earlier delivery of its scope is acked). It
// returns when the broker confirmed the ack, where it confirms acks.
func (d *Delivery) Ack(ctx context.Context) error {
	return d.settle(ctx, settleAck, 0, "")
}

// Nack returns the delivery to the broker, to be delivered again no sooner
// than delay from now. A delay above zero needs capability.Subscription.NackDelay;
// without it Nack returns an error matching errors.ErrUnsupported and settles
// nothing.
func (d *Delivery) Nack(ctx context.Context, delay time.Duration) error {
	if delay < 0 {
		delay = 0
	}
	if delay > 0 && d.sub != nil && !d.sub.caps.NackDelay {
		return newError("nack", driver.Invalid, false, fmt.Errorf("nack with delay: %w", errors.ErrUnsupported))
	}
	return d.settle(ctx, settleNack, delay, "")
}

// Retry nacks the delivery after its attempt-th failure (below 1:
// d.Attempt), to come back after that attempt's backoff: RunOptions.Backoff
// for a delivery Run handed out, 100ms doubling to 30s otherwise. Where the
// broker cannot delay a nack, Retry waits the delay out itself (up to half
// the lock timeout, and ctx) and nacks at once. The nack is sent even when
// ctx has ended, within SettleTimeout. A detached delivery is only marked
// settled.
func (d *Delivery) Retry(ctx context.Context, attempt int) error {
	if d.sub == nil {
		return d.Nack(ctx, 0)
	}
	if attempt < 1 {
		attempt = d.Attempt
	}
	var b Backoff
	if d.backoff != nil {
		b = *d.backoff
	}
	delay := b.Delay(max(attempt, 1))
	if !d.sub.caps.NackDelay {
		if lt := d.sub.caps.LockTimeout; lt > 0 && delay > lt/2 {
			delay = lt / 2
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		delay = 0
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.sub.settleTimeout)
	defer cancel()
	return d.Nack(sctx, delay)
}

// DeadLetter moves the delivery to the dead-letter queue with reason (as
// driver.BoundReason bounds it), which readers find in the header
// driver.HeaderDeadLetterReason. Without capability.Subscription.DeadLetter
// it settles nothing and returns errors.ErrUnsupported.
func (d *Delivery) DeadLetter(ctx context.Context, reason string) error {
	if d.sub != nil && !d.sub.caps.DeadLetter {
		return newError("dead-letter", driver.Invalid, false, fmt.Errorf("dead-letter: %w", errors.ErrUnsupported))
	}
	return d.settle(ctx, settleDeadLetter, 0, driver.BoundReason(reason))
}

// ExtendLock keeps the delivery locked for dur from now, so that a slow
// handler does not see it redelivered elsewhere. It needs
// capability.Subscription.LockExtendable (else errors.ErrUnsupported) and dur > 0 (else
// ErrInvalid). Extending a settled delivery returns an error matching
// ErrLockLost.
func (d *Delivery) ExtendLock(ctx context.Context, dur time.Duration) error {
	if dur <= 0 {
		// A zero or negative extension would release the lock (SQS's
		// visibility 0): that is Nack's job, not ExtendLock's.
		return newError("extend-lock", driver.Invalid, false, fmt.Errorf("extend lock by %s: the duration must be positive", dur))
	}
	if d.sub == nil {
		return nil
	}
	if !d.sub.caps.LockExtendable {
		return newError("extend-lock", driver.Invalid, false, fmt.Errorf("extend lock: %w", errors.ErrUnsupported))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled {
		return newError("extend-lock", driver.LockLost, false, errors.New("delivery already settled"))
	}
	d.sub.mu.RLock()
	defer d.sub.mu.RUnlock()
	if d.sub.closed {
		return newError("extend-lock", driver.Closed, false, errSubClosed)
	}
	return wrapErr("extend-lock", d.sub.d.Classify, d.sub.d.ExtendLocks(ctx, d.ackID[:], dur))
}

type settleKind uint8

const (
	settleAck settleKind = iota
	settleNack
	settleDeadLetter
)

var settleOps = [...]string{settleAck: "ack", settleNack: "nack", settleDeadLetter: "dead-letter"}

// settle is Ack, Nack or DeadLetter: delay is the nack's, reason the
// dead-letter's. (No closure and no slice per call: Ack is on the hot path.)
func (d *Delivery) settle(ctx context.Context, kind settleKind, delay time.Duration, reason string) error {
	op := settleOps[kind]
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled {
		return nil
	}
	if d.sub == nil { // detached: nothing to tell a broker
		d.settled = true
		return nil
	}
	d.sub.mu.RLock()
	defer d.sub.mu.RUnlock()
	if d.sub.closed {
		return newError(op, driver.Closed, false, errSubClosed)
	}
	if err := ctx.Err(); err != nil {
		return wrapErr(op, d.sub.d.Classify, err)
	}
	ctx, cancel := d.sub.settleCtx(ctx)
	defer cancel()
	var derr error
	switch kind {
	case settleAck:
		derr = d.sub.d.SendAcks(ctx, d.ackID[:])
	case settleNack:
		derr = d.sub.d.SendNacks(ctx, d.ackID[:], delay)
	case settleDeadLetter:
		derr = d.sub.d.SendDeadLetters(ctx, d.ackID[:], reason)
	}
	err := wrapErr(op, d.sub.d.Classify, derr)
	if err != nil && kind == settleAck {
		d.ackFailed = true
	}
	if err == nil {
		d.sub.tel.settledOne(ctx, kind)
	}
	if err == nil || errors.Is(err, ErrLockLost) {
		// A lost lock settles the delivery too: the broker has taken it
		// back, and nothing this consumer does can change that.
		d.settled = true
	}
	return err
}

// ackWanted reports whether an Ack of d was sent and failed, so that what
// settles d next should be another Ack, not a Nack: the handler decided to
// acknowledge (package idem does so only after its commit).
func (d *Delivery) ackWanted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ackFailed
}
