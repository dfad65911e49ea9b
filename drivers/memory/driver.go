package memory

import (
	"context"
	"slices"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// topicDriver implements driver.Topic.
type topicDriver struct {
	b      *Broker
	name   string
	t      *topic // nil: the topic did not exist when opened
	closed bool   // guarded by b.mu
	// conflicts are those of the URL the topic was opened by.
	conflicts []capability.Conflict
}

var _ driver.Topic = (*topicDriver)(nil)

func (d *topicDriver) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.b.mu.Lock()
	defer d.b.mu.Unlock()
	switch {
	case d.closed:
		return errTopicClosed
	case d.b.closed:
		return errBrokerClosed
	case d.t == nil:
		return errorf(codeNotFound, "topic %q does not exist", d.name)
	}
	if err := d.t.check(msgs); err != nil {
		return err
	}
	now := d.b.clock.Now()
	for _, m := range msgs {
		d.t.publish(m, now)
	}
	return nil
}

func (d *topicDriver) Capabilities() capability.Topic {
	if d.t == nil {
		c := TopicConfig{}.TopicCapabilities()
		c.Source = missingSource("topic "+d.name, capability.SettingDedupWindow, capability.SettingMaxMessageSize)
		return c
	}
	c := d.t.caps
	c.Source.Conflicts = slices.Concat(c.Source.Conflicts, d.conflicts)
	return c
}

func (d *topicDriver) Classify(err error) driver.ErrorInfo { return classify(err) }

// As accepts **Broker.
func (d *topicDriver) As(i any) bool { return asBroker(d.b, i) }

func (d *topicDriver) ErrorAs(error, any) bool { return false }

func (d *topicDriver) Close() error {
	d.b.mu.Lock()
	defer d.b.mu.Unlock()
	d.closed = true
	return nil
}

func asBroker(b *Broker, i any) bool {
	p, ok := i.(**Broker)
	if ok {
		*p = b
	}
	return ok
}

// subDriver implements driver.Subscription: one consumer handle on a
// subscription or a dead-letter queue.
type subDriver struct {
	b    *Broker
	desc string
	q    *queue  // nil: the subscription did not exist when opened
	h    *handle // nil when q is nil or the broker was closed
	caps capability.Subscription
	// closed is set by Close; guarded by b.mu.
	closed bool
}

var _ driver.Subscription = (*subDriver)(nil)

// usable checks that the handle can be used. Called with b.mu held.
func (s *subDriver) usable() error {
	switch {
	case s.closed:
		return errSubClosed
	case s.b.closed:
		return errBrokerClosed
	case s.q == nil:
		return errorf(codeNotFound, "subscription %s does not exist", s.desc)
	case s.h == nil || s.h.closed:
		return errSubClosed
	}
	return nil
}

func (s *subDriver) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	if maxMessages < 1 {
		maxMessages = 1
	}
	clock := s.b.clock
	// Messages already deliverable are returned even if ctx is done, so a
	// receive with a done context polls.
	woken := false
	for {
		s.b.mu.Lock()
		if err := s.usable(); err != nil {
			if woken && s.q != nil {
				s.q.notify() // the turn was ours: pass it on
			}
			s.b.mu.Unlock()
			return nil, err
		}
		now := clock.Now()
		s.q.expire(now)
		if out := s.q.take(s.h, maxMessages, now); len(out) > 0 {
			s.q.taken()
			s.b.mu.Unlock()
			return out, nil
		}
		if woken {
			s.q.wakes++
		}
		if err := ctx.Err(); err != nil {
			s.b.mu.Unlock()
			return nil, err
		}
		signal, next, done := s.q.wait(woken), s.q.nextDue(now), s.h.done
		s.b.mu.Unlock()

		var timer <-chan time.Time
		stop := func() {}
		if !next.IsZero() {
			timer, stop = afterAt(clock, next)
		}
		woken = false
		select {
		case <-ctx.Done():
			stop()
			s.b.mu.Lock()
			s.q.leave(signal)
			s.b.mu.Unlock()
			return nil, ctx.Err()
		case <-signal:
			woken = true
		case <-timer:
		case <-done:
		case <-s.b.done:
		}
		stop()
		if !woken {
			s.b.mu.Lock()
			s.q.leave(signal)
			s.b.mu.Unlock()
		}
	}
}

// settle runs f on the entry of every id, after applying expired locks.
// It settles what it can and returns the first error.
func (s *subDriver) settle(ctx context.Context, ids []driver.AckID, f func(e *entry, now time.Time)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	now := s.b.clock.Now()
	s.q.expire(now)
	var errs []error // by index into ids, once one failed
	for i, id := range ids {
		e, err := s.q.lookup(id)
		if err != nil {
			if errs == nil {
				errs = make([]error, len(ids))
			}
			errs[i] = err
			continue
		}
		f(e, now)
	}
	s.q.compact()
	s.q.notify()
	return driver.BatchErrors(errs)
}

func (s *subDriver) SendAcks(ctx context.Context, ids []driver.AckID) error {
	return s.settle(ctx, ids, func(e *entry, _ time.Time) { s.q.settle(e, stAcked) })
}

func (s *subDriver) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	if delay < 0 {
		delay = 0
	}
	return s.settle(ctx, ids, func(e *entry, now time.Time) { s.q.release(e, delay, now) })
}

func (s *subDriver) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	if !s.caps.DeadLetter {
		return errorf(codeInvalid, "%s has no dead-letter queue", s.desc)
	}
	return s.settle(ctx, ids, func(e *entry, _ time.Time) { s.q.deadLetter(e, reason) })
}

func (s *subDriver) ExtendLocks(ctx context.Context, ids []driver.AckID, d time.Duration) error {
	if !s.caps.LockExtendable {
		return errorf(codeInvalid, "%s: lock extension is not supported", s.desc)
	}
	return s.settle(ctx, ids, func(e *entry, now time.Time) { s.q.extend(e, now.Add(d)) })
}

func (s *subDriver) Capabilities() capability.Subscription { return s.caps }

func (s *subDriver) Classify(err error) driver.ErrorInfo { return classify(err) }

// As accepts **Broker.
func (s *subDriver) As(i any) bool { return asBroker(s.b, i) }

func (s *subDriver) ErrorAs(error, any) bool { return false }

// Close returns the handle's unsettled deliveries to the queue at once
// (and, on a Partitioned topic, rewinds its partitions to their commit
// points and reassigns them).
func (s *subDriver) Close() error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.closed = true
	if s.h != nil && !s.b.closed {
		s.q.close(s.h, s.b.clock.Now())
	}
	return nil
}
