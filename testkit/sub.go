package testkit

import (
	"context"
	"errors"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// faultySub is the delivery path between the memory broker and the inbox:
// a driver.Subscription over the kit's memory subscription that loses the
// first acknowledgement after each message's effect committed (the crash
// between commit and ack), and gives every nack the same delay, one step of
// the fake clock, so that retries do not depend on the inbox's jittered
// backoff.
type faultySub[Tx any] struct {
	k *Kit[Tx]
}

// ref is one delivery of the memory broker, as the faulty subscription's
// ack ID.
type ref struct {
	d *broker.Delivery
	// committed: the handler succeeded for this delivery and the kit let
	// its transaction commit; its ack is the one after a commit.
	committed bool
}

// errAckLost is the injected crash between commit and ack.
var errAckLost = errors.New("testkit: injected crash after the commit: the acknowledgement was lost, the broker delivers the message again")

func (s *faultySub[Tx]) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	ds, err := s.k.sub.Receive(ctx, maxMessages)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	out := make([]*driver.Message, len(ds))
	for i, d := range ds {
		r := &ref{d: d}
		s.k.cur = r
		m := d.Message
		out[i] = &driver.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body, AckID: r,
			Attempt: d.Attempt, Redelivered: d.Redelivered, PublishTime: d.PublishTime}
	}
	return out, nil
}

func (s *faultySub[Tx]) SendAcks(ctx context.Context, ids []driver.AckID) error {
	var errs []error
	for _, id := range ids {
		r := id.(*ref)
		if t := s.k.messages[r.d.Message.ID]; r.committed && t != nil && !t.crashAfter && !s.k.opts.NoCrashAfterCommit {
			t.crashAfter = true
			s.k.rep.CrashesAfterCommit++
			// The process died: the broker takes the message back.
			errs = append(errs, r.d.Nack(ctx, 0), errAckLost)
			continue
		}
		errs = append(errs, r.d.Ack(ctx))
	}
	return errors.Join(errs...)
}

func (s *faultySub[Tx]) SendNacks(ctx context.Context, ids []driver.AckID, _ time.Duration) error {
	// A retry is due after one step of the kit's clock, where the profile
	// delays a nack; where it cannot (ServiceBus), at once.
	delay := step
	if !s.Capabilities().NackDelay {
		delay = 0
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, id.(*ref).d.Nack(ctx, delay))
	}
	return errors.Join(errs...)
}

func (s *faultySub[Tx]) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	var errs []error
	for _, id := range ids {
		errs = append(errs, id.(*ref).d.DeadLetter(ctx, reason))
	}
	return errors.Join(errs...)
}

func (s *faultySub[Tx]) ExtendLocks(ctx context.Context, ids []driver.AckID, d time.Duration) error {
	var errs []error
	for _, id := range ids {
		errs = append(errs, id.(*ref).d.ExtendLock(ctx, d))
	}
	return errors.Join(errs...)
}

func (s *faultySub[Tx]) Capabilities() capability.Subscription { return s.k.sub.Capabilities() }

func (s *faultySub[Tx]) Classify(err error) driver.ErrorInfo {
	if errors.Is(err, errAckLost) {
		return driver.ErrorInfo{Code: driver.LockLost}
	}
	var be *broker.Error
	if errors.As(err, &be) {
		return driver.ErrorInfo{Code: driver.CodeOf(err), MaybeSent: be.MaybeSent}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return driver.ErrorInfo{Code: driver.Canceled}
	case errors.Is(err, context.DeadlineExceeded):
		return driver.ErrorInfo{Code: driver.DeadlineExceeded}
	}
	return driver.ErrorInfo{}
}

func (s *faultySub[Tx]) As(any) bool             { return false }
func (s *faultySub[Tx]) ErrorAs(error, any) bool { return false }
func (s *faultySub[Tx]) Close() error            { return s.k.sub.Close() }
