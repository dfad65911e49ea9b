package idem

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// fakeSub is a driver.Subscription that delivers what a test queues and
// records how each delivery was settled, so that a test sees what the
// inbox told the broker: the inbox's deliveries are real broker
// deliveries, settled through package broker.
type fakeSub struct {
	caps capability.Subscription

	mu      sync.Mutex
	queue   []*driver.Message
	nextAck int
	settled map[int]string // ack ID -> "ack", "nack" or "dead-letter: reason"
	// failAcks fails the next SendAcks calls.
	failAcks int
}

var errAckFailed = errors.New("fake broker: ack failed")

func (s *fakeSub) ReceiveBatch(ctx context.Context, max int) ([]*driver.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return nil, errors.New("fake broker: nothing queued")
	}
	n := min(max, len(s.queue))
	out := s.queue[:n]
	s.queue = s.queue[n:]
	return out, nil
}

func (s *fakeSub) settle(ids []driver.AckID, how string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.settled[id.(int)] = how
	}
}

func (s *fakeSub) SendAcks(ctx context.Context, ids []driver.AckID) error {
	s.mu.Lock()
	if s.failAcks > 0 {
		s.failAcks--
		s.mu.Unlock()
		return errAckFailed
	}
	s.mu.Unlock()
	s.settle(ids, "ack")
	return nil
}

func (s *fakeSub) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	s.settle(ids, "nack")
	return nil
}

func (s *fakeSub) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	s.settle(ids, "dead-letter: "+reason)
	return nil
}

func (s *fakeSub) ExtendLocks(context.Context, []driver.AckID, time.Duration) error { return nil }
func (s *fakeSub) Capabilities() capability.Subscription                            { return s.caps }
func (s *fakeSub) Classify(err error) driver.ErrorInfo {
	return driver.ErrorInfo{Code: driver.Unavailable}
}
func (s *fakeSub) As(any) bool             { return false }
func (s *fakeSub) ErrorAs(error, any) bool { return false }
func (s *fakeSub) Close() error            { return nil }
func (s *fakeSub) push(m *driver.Message) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextAck++
	m.AckID = s.nextAck
	s.queue = append(s.queue, m)
	return s.nextAck
}

// fakeClock is the inbox's clock (Options.Now), moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is a test's fake store, fake broker and clock.
type env struct {
	t     *testing.T
	db    *fakeDB
	sub   *fakeSub
	bs    *broker.Subscription
	clock *fakeClock
	acks  map[*broker.Delivery]int
}

// testCaps are the capabilities of the fake subscription by default: a
// queue (no order per aggregate), nacks with a delay (Retry does not
// wait), dead letters, a delivery limit of 10.
var testCaps = capability.Subscription{Ordering: capability.OrderNone, DeadLetter: true, NackDelay: true,
	DeliveryCount: true, DeliveryLimit: 10, RedeliveryHorizon: 24 * time.Hour}

func newEnv(t *testing.T, caps capability.Subscription) *env {
	e := &env{t: t, db: newFakeDB(t), sub: &fakeSub{caps: caps, settled: map[int]string{}},
		clock: &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, acks: map[*broker.Delivery]int{}}
	e.bs = broker.NewSubscription(e.sub, &broker.SubscriptionOptions{Telemetry: broker.Telemetry{Logger: quiet}})
	t.Cleanup(func() { _ = e.bs.Close() })
	return e
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// inbox builds an inbox for consumer "c" on the fake store, with the
// env's clock and a quiet logger.
func (e *env) inbox(o Options) *Inbox[*fakeTx] {
	e.t.Helper()
	if o.Now == nil {
		o.Now = e.clock.Now
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	in, err := NewInbox[*fakeTx](e.db, "c", e.sub.caps, &o)
	if err != nil {
		e.t.Fatalf("NewInbox: %v", err)
	}
	return in
}

// deliver has the fake broker deliver m as its attempt-th delivery.
func (e *env) deliver(m *broker.Message, attempt int) *broker.Delivery {
	e.t.Helper()
	ack := e.sub.push(&driver.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body, Attempt: attempt, Redelivered: attempt > 1})
	ds, err := e.bs.Receive(e.t.Context(), 1)
	if err != nil || len(ds) != 1 {
		e.t.Fatalf("receive: %v, %v", ds, err)
	}
	e.acks[ds[0]] = ack
	return ds[0]
}

// settled says how d was settled: "ack", "nack", "dead-letter: reason",
// or "" for not at all.
func (e *env) settled(d *broker.Delivery) string {
	e.sub.mu.Lock()
	defer e.sub.mu.Unlock()
	return e.sub.settled[e.acks[d]]
}

// handle delivers m (attempt 1) and handles it with h.
func (e *env) handle(in *Inbox[*fakeTx], m *broker.Message, h Handler[*fakeTx]) (*broker.Delivery, Result, error) {
	e.t.Helper()
	d := e.deliver(m, 1)
	r, err := in.Handle(e.t.Context(), d, h)
	return d, r, err
}

// msg is a message with an ID and, if aggregate is not empty, the event
// headers of aggregate at version (none for version 0).
func msg(id, aggregate string, version int64) *broker.Message {
	m := &broker.Message{ID: id, Body: []byte("body of " + id)}
	if aggregate != "" {
		m.Headers = Event{AggregateID: aggregate, Version: version}.Headers()
	}
	return m
}

// event is msg for version v of aggregate, its ID derived from both.
func event(aggregate string, v int64) *broker.Message {
	return msg(aggregate+"-v"+strconv.FormatInt(v, 10), aggregate, v)
}

// applyAll is a handler that applies every message's effect.
func applyAll(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
	return tx.apply(d.Message.ID)
}

// testTable is the version table of the tests' versioned inboxes.
var testTable = VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"}

// applyVersioned is a handler behind version checks: version 1 inserts
// the aggregate's row, and every version applies its effect.
func applyVersioned(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
	ev, err := ParseEvent(d.Message)
	if err != nil {
		return err
	}
	if ev.Version == 1 {
		if err := tx.setVersion(testTable, ev.AggregateID, 1); err != nil {
			return err
		}
	}
	return tx.apply(d.Message.ID)
}
