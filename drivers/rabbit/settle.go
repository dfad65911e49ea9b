package rabbit

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker/driver"
)

// settle claims a and runs f on its channel, mapping a closed channel to
// errLockLost (RabbitMQ requeues what a closed channel held).
func settle(a *ackID, f func(ch *amqp.Channel) error) error {
	if !a.c.take(a.tag) {
		return errLockLost
	}
	defer a.c.sent(a.tag)
	if err := f(a.c.ch); err != nil {
		if errors.Is(err, amqp.ErrClosed) || a.c.ch.IsClosed() {
			return fmt.Errorf("%w: %w", errLockLost, err)
		}
		return err
	}
	return nil
}

func (s *subscription) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	var first error
	for _, id := range ids {
		err := s.nack(ctx, id.(*ackID), delay)
		if first == nil {
			first = err
		}
	}
	return first
}

func (s *subscription) nack(ctx context.Context, a *ackID, delay time.Duration) error {
	if s.reader {
		return s.putBack(a)
	}
	if s.limit > 0 && a.attempt >= s.limit && (delay > 0 || a.prior > 0) {
		// The broker's count cannot see this delivery's earlier lives (or
		// the delay queue would reset it): apply the limit here. A limit
		// comes with a dead-letter exchange (checked at open).
		return s.deadLetter(ctx, a, "delivery_limit")
	}
	if delay <= 0 || !s.o.NackDelay {
		// One message at a time: RabbitMQ counts single rejects toward the
		// delivery limit.
		return settle(a, func(ch *amqp.Channel) error { return ch.Reject(a.tag, true) })
	}
	if !a.c.has(a.tag) {
		return errLockLost
	}
	q, err := s.delayQueue(ctx, a.queue, delay)
	if err != nil {
		return err
	}
	p := republish(&a.d, a.key, amqp.Table{hdrPrior: int32(a.attempt)})
	if err := s.pub.publish(ctx, []outgoing{{exchange: "", key: q, pub: p}}); err != nil {
		if errors.As(err, new(*tooLargeError)) {
			// The delivery's own headers leave no room for the driver's in
			// a frame (only a foreign producer sends such a message):
			// requeue it without the delay rather than fail the nack.
			return settle(a, func(ch *amqp.Channel) error { return ch.Reject(a.tag, true) })
		}
		var re *returnedError
		if errors.As(err, &re) {
			s.forgetDelayQueue(q)
		}
		return err
	}
	return settle(a, func(ch *amqp.Channel) error { return ch.Ack(a.tag, false) })
}

// putBack returns a reader's delivery to its queue as unread, with what
// counts least toward a quorum queue's delivery limit: it first cancels
// the consumer (basic.cancel), so that the broker does not hand the
// message straight back to this reader, then sends basic.nack with
// requeue, never basic.reject. RabbitMQ 4.3 counts basic.reject with
// requeue, and the return of what a consumer held when its channel
// closes, as failed deliveries (x-delivery-count, which its delivery
// limit reads), and basic.nack with requeue as a release (x-acquired-count
// only); before 4.3 every return counts once (3.x: x-delivery-count;
// 4.0 to 4.2: the acquired count). The old put-back, basic.reject while
// the consumer was still open, counted each look twice before 4.3: the
// reject, and the return at close of the copy the open consumer took
// again.
func (s *subscription) putBack(a *ackID) error {
	if err := s.retire(a.c); err != nil {
		if a.c.ch.IsClosed() {
			return fmt.Errorf("%w: %w", errLockLost, err)
		}
		return err
	}
	err := settle(a, func(ch *amqp.Channel) error { return ch.Nack(a.tag, false, true) })
	s.closeIdle(a.c)
	return err
}

// delayQueue declares (at most hourly) the delay queue for queue and
// delay, and returns its name.
func (s *subscription) delayQueue(ctx context.Context, queue string, delay time.Duration) (string, error) {
	ttl := delayBucket(delay)
	name := delayQueueName(queue, ttl)
	s.declMu.Lock()
	defer s.declMu.Unlock()
	if t, ok := s.declared[name]; ok && time.Since(t) < time.Hour {
		return name, nil
	}
	err := s.conn.withChannel(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(name, true, false, false, false, delayQueueArgs(queue, ttl))
		return err
	})
	if err != nil {
		return "", err
	}
	s.declared[name] = time.Now()
	return name, nil
}

func (s *subscription) forgetDelayQueue(name string) {
	s.declMu.Lock()
	defer s.declMu.Unlock()
	delete(s.declared, name)
}

func (s *subscription) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	var first error
	for _, id := range ids {
		err := s.deadLetter(ctx, id.(*ackID), reason)
		if first == nil {
			first = err
		}
	}
	return first
}

// deadLetter publishes a copy with the reason to the dead-letter exchange,
// then acks the original. AMQP 0-9-1's reject carries no reason, hence the
// copy; a failure between the two leaves a duplicate in the dead-letter
// queue, never a loss.
func (s *subscription) deadLetter(ctx context.Context, a *ackID, reason string) error {
	if s.o.DeadLetterExchange == "" {
		return &invalidError{"no dead-letter exchange configured"}
	}
	if !a.c.has(a.tag) {
		return errLockLost
	}
	p := republish(&a.d, a.key, amqp.Table{hdrReason: reason, hdrPrior: int32(a.attempt)})
	if err := s.pub.publish(ctx, []outgoing{{exchange: s.o.DeadLetterExchange, key: a.d.RoutingKey, pub: p}}); err != nil {
		if errors.As(err, new(*tooLargeError)) {
			// No room for the copy's headers in a frame (a foreign
			// producer's message at the limit): reject it without requeue,
			// which RabbitMQ dead-letters through the queue's own
			// x-dead-letter-exchange (reason "rejected").
			return settle(a, func(ch *amqp.Channel) error { return ch.Reject(a.tag, false) })
		}
		return err
	}
	return settle(a, func(ch *amqp.Channel) error { return ch.Ack(a.tag, false) })
}

func (s *subscription) ExtendLocks(context.Context, []driver.AckID, time.Duration) error {
	return &invalidError{"RabbitMQ has no lock to extend"}
}
