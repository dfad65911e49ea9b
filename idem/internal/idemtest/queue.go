package idemtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// ErrEmpty is returned (wrapped) by Receive on a Queue's subscription when
// no message is waiting.
var ErrEmpty = errors.New("idemtest: queue is empty")

// ErrAckFailed is the error a Queue's FailAcks makes acks fail with.
var ErrAckFailed = errors.New("idemtest: ack failed (injected)")

// Queue is a scripted broker for store tests: every Push is one broker copy
// of a message (push the same message twice to deliver it twice, to
// concurrent receivers), nacks put the copy back with its attempt count
// raised, and acks can be made to fail. Its subscription's Receive returns
// an error matching ErrEmpty instead of waiting when nothing is pending.
type Queue struct {
	caps capability.Subscription

	mu       sync.Mutex
	pending  []*copyOf
	inflight map[int64]*copyOf
	tag      int64
	failAcks int
	pick     func(n int) int

	// Counts by message ID.
	acks, nacks, dead map[string]int
	delays            []time.Duration
}

type copyOf struct {
	m       driver.Message
	attempt int
}

// NewQueue returns an empty queue declaring caps.
func NewQueue(caps capability.Subscription) *Queue {
	return &Queue{caps: caps, inflight: map[int64]*copyOf{}, acks: map[string]int{}, nacks: map[string]int{}, dead: map[string]int{}}
}

// Push adds one copy of each message.
func (q *Queue) Push(msgs ...*broker.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		q.pending = append(q.pending, &copyOf{m: driver.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body}})
	}
}

// SetPick makes Receive take the pending copy at index pick(len(pending))
// instead of the first.
func (q *Queue) SetPick(pick func(n int) int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pick = pick
}

// FailAcks makes the next n acks fail with ErrAckFailed, as a broker
// connection lost after the commit would; the copies stay in flight until
// Expire.
func (q *Queue) FailAcks(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failAcks = n
}

// Expire returns every in-flight copy to the queue, as lock expiry would.
func (q *Queue) Expire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for tag, c := range q.inflight {
		delete(q.inflight, tag)
		q.pending = append(q.pending, c)
	}
}

// Len returns the number of copies pending or in flight.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending) + len(q.inflight)
}

// Acks, Nacks and DeadLetters return how many times a message was settled
// each way.
func (q *Queue) Acks(id string) int        { q.mu.Lock(); defer q.mu.Unlock(); return q.acks[id] }
func (q *Queue) Nacks(id string) int       { q.mu.Lock(); defer q.mu.Unlock(); return q.nacks[id] }
func (q *Queue) DeadLetters(id string) int { q.mu.Lock(); defer q.mu.Unlock(); return q.dead[id] }

// NackDelays returns the delays nacks asked for, in order.
func (q *Queue) NackDelays() []time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]time.Duration(nil), q.delays...)
}

// Subscription returns a subscription on the queue with opts (nil:
// defaults, and a logger that discards).
func (q *Queue) Subscription(opts *broker.SubscriptionOptions) *broker.Subscription {
	o := broker.SubscriptionOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return broker.NewSubscription(queueSub{q}, &o)
}

// Receive takes one delivery; it fails the test's expectations loudly.
func (q *Queue) Receive(ctx context.Context, sub *broker.Subscription) (*broker.Delivery, error) {
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		return nil, err
	}
	return ds[0], nil
}

// Drain receives on a subscription of its own until the queue is empty,
// passing each delivery to f, and returns the first error other than
// ErrEmpty. Several goroutines may drain one queue at once.
func (q *Queue) Drain(ctx context.Context, f func(*broker.Delivery)) error {
	sub := q.Subscription(nil)
	for {
		d, err := q.Receive(ctx, sub)
		if errors.Is(err, ErrEmpty) {
			return nil
		}
		if err != nil {
			return err
		}
		f(d)
	}
}

type queueSub struct{ q *Queue }

func (s queueSub) ReceiveBatch(ctx context.Context, max int) ([]*driver.Message, error) {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil, ErrEmpty
	}
	var out []*driver.Message
	for len(out) < max && len(q.pending) > 0 {
		i := 0
		if q.pick != nil {
			i = q.pick(len(q.pending))
		}
		c := q.pending[i]
		if i == 0 { // no copy: the benchmarks queue many messages
			q.pending = q.pending[1:]
		} else {
			q.pending = append(q.pending[:i:i], q.pending[i+1:]...)
		}
		c.attempt++
		q.tag++
		q.inflight[q.tag] = c
		m := c.m
		m.AckID, m.Attempt, m.Redelivered = q.tag, c.attempt, c.attempt > 1
		out = append(out, &m)
	}
	return out, nil
}

func (s queueSub) take(ids []driver.AckID, f func(c *copyOf)) error {
	for _, id := range ids {
		c, ok := s.q.inflight[id.(int64)]
		if !ok {
			return errLockLost
		}
		delete(s.q.inflight, id.(int64))
		f(c)
	}
	return nil
}

var errLockLost = errors.New("idemtest: not in flight")

func (s queueSub) SendAcks(_ context.Context, ids []driver.AckID) error {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failAcks > 0 {
		q.failAcks--
		return ErrAckFailed
	}
	return s.take(ids, func(c *copyOf) { q.acks[c.m.ID]++ })
}

func (s queueSub) SendNacks(_ context.Context, ids []driver.AckID, delay time.Duration) error {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	return s.take(ids, func(c *copyOf) {
		q.nacks[c.m.ID]++
		q.delays = append(q.delays, delay)
		q.pending = append(q.pending, c)
	})
}

func (s queueSub) SendDeadLetters(_ context.Context, ids []driver.AckID, _ string) error {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	return s.take(ids, func(c *copyOf) { q.dead[c.m.ID]++ })
}

func (queueSub) ExtendLocks(context.Context, []driver.AckID, time.Duration) error {
	return errors.ErrUnsupported
}
func (s queueSub) Capabilities() capability.Subscription { return s.q.caps }
func (queueSub) Classify(err error) driver.ErrorInfo {
	switch {
	case errors.Is(err, errLockLost):
		return driver.ErrorInfo{Code: driver.LockLost}
	case errors.Is(err, ErrAckFailed):
		return driver.ErrorInfo{Code: driver.Unavailable}
	case errors.Is(err, ErrEmpty):
		return driver.ErrorInfo{Code: driver.NotFound}
	}
	return driver.ErrorInfo{}
}
func (queueSub) As(any) bool             { return false }
func (queueSub) ErrorAs(error, any) bool { return false }
func (queueSub) Close() error            { return nil }

// Msg builds a message with the given ID and body and, when aggregate is
// not empty, event headers for version (and sequence = version).
func Msg(id, body, aggregate string, version int64) *broker.Message {
	m := &broker.Message{ID: id, Body: []byte(body), Key: aggregate}
	if aggregate != "" {
		m.Headers = broker.Headers{
			{"wary-aggregate-id", aggregate},
			{"wary-aggregate-version", fmt.Sprint(version)},
			{"wary-sequence", fmt.Sprint(version)},
		}
	}
	return m
}
