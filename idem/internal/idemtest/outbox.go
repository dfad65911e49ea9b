package idemtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
)

// OutboxBroker is a real driver for the outbox scenarios: one topic,
// ordered per Message.Key with head-of-line blocking (an SQS FIFO or
// Service Bus profile), without broker-side dedup (so that a republished
// message reaches the consumer and the inbox must absorb it) and without a
// delivery limit, and one subscription on it.
type OutboxBroker struct {
	Topic *broker.Topic
	// Subscribe opens one more consumer on the subscription; the harness
	// closes it when t ends.
	Subscribe func(t testing.TB) *broker.Subscription
	// MaxMessageSize is the topic's limit; larger messages fail with
	// broker.ErrTooLarge.
	MaxMessageSize int
}

// OutboxCaps says what the store under test can do.
type OutboxCaps struct {
	// ConcurrentWriters: transactions that add to the outbox can be open
	// at the same time and commit in any order, and several relays claim
	// at once (PostgreSQL). Without it (SQLite), writers are serialised and
	// relays take turns under a lease.
	ConcurrentWriters bool
	// Polls: with ConcurrentWriters, the relay has no wake-up from the
	// database (MySQL: no NOTIFY) and polls; the scenarios do not wait for
	// it to listen.
	Polls bool
}

// RunOutbox runs the outbox and relay scenarios on a store (its outbox's
// and relay's parts), with b's driver as the broker, and the
// idempotency-key scenarios (RunKeys).
func RunOutbox[Tx any](t *testing.T, f Factory[Tx], b func(t testing.TB) OutboxBroker, caps OutboxCaps) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory[Tx], OutboxBroker, OutboxCaps)
	}{
		{"AddAndRelay", testOutboxAdd[Tx]},
		{"CrashAfterPublish", testRelayCrash[Tx]},
		{"OutOfOrderCommits", testOutOfOrder[Tx]},
		{"ThreeRelays", testThreeRelays[Tx]},
		{"Poison", testPoison[Tx]},
		{"WindowFailure", testWindowFailure[Tx]},
		{"LeaseHolds", testLeaseHolds[Tx]},
		{"HealthAndPurge", testHealthPurge[Tx]},
		{"Wakeup", testWakeup[Tx]},
		{"CursorAggregate", testCursorAggregate[Tx]},
		{"ClaimAggregates", testClaimAggregates[Tx]},
		{"Hostile", testHostile[Tx]},
		{"ListWithoutPayloads", testOutboxListWithoutPayloads[Tx]},
		{"SourceContract", testSourceContract[Tx]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, f, b(t), caps) })
	}
	RunKeys(t, f)
}

// Source are source settings a suite asks of a store (see SourceDB); a
// store applies those it has (a lease, claims in a pipeline, the log).
type Source struct {
	Lease        time.Duration
	PerAggregate int
	Pipeline     int
	Stream       bool
}

// SourceDB is implemented by a DB whose stores can give their relays other
// source settings: WithSource returns a store on p's tables with s's.
type SourceDB[Tx any] interface {
	WithSource(p idem.Store[Tx], s Source) (idem.Store[Tx], error)
}

// OutboxEnv is an Env whose store has an outbox.
type OutboxEnv[Tx any] struct {
	*Env[Tx]
	OS     Driver[Tx]
	Outbox *outbox.Outbox[Tx]
}

// SetupOutbox is Setup for the outbox scenarios; it fails t if the store
// has no outbox.
func SetupOutbox[Tx any](t testing.TB, f Factory[Tx]) *OutboxEnv[Tx] {
	t.Helper()
	e := Setup(t, f, "")
	ob, err := outbox.New(e.Store, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &OutboxEnv[Tx]{Env: e, OS: e.Driver, Outbox: ob}
}

// Add adds msgs in a transaction of their own and commits.
func (e *OutboxEnv[Tx]) Add(msgs ...*outbox.Message) []int64 {
	e.T.Helper()
	var seqs []int64
	e.InTx(func(tx Tx) error {
		var err error
		seqs, err = e.Outbox.Add(e.Ctx, tx, msgs...)
		return err
	})
	return seqs
}

// Relay returns a relay on the env's store with fast test settings
// (quiet, 5ms polls, 1ms backoff, no purge) over o.
func (e *OutboxEnv[Tx]) Relay(topic *broker.Topic, o *outbox.RelayOptions) *outbox.Relay {
	e.T.Helper()
	return e.relayOn(e.Store, topic, o)
}

// SourceRelay is Relay on the env's tables with source settings src; it
// skips the test if the store's DB is no SourceDB.
func (e *OutboxEnv[Tx]) SourceRelay(topic *broker.Topic, src Source, o *outbox.RelayOptions) *outbox.Relay {
	e.T.Helper()
	sd, ok := e.DB.(SourceDB[Tx])
	if !ok {
		e.T.Skip("the store's DB sets no source settings (idemtest.SourceDB)")
	}
	p, err := sd.WithSource(e.Store, src)
	if err != nil {
		e.T.Fatal(err)
	}
	return e.relayOn(p, topic, o)
}

func (e *OutboxEnv[Tx]) relayOn(p idem.Store[Tx], topic *broker.Topic, o *outbox.RelayOptions) *outbox.Relay {
	e.T.Helper()
	if o == nil {
		o = &outbox.RelayOptions{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PollInterval == 0 {
		o.PollInterval = 5 * time.Millisecond
	}
	if o.Backoff == (broker.Backoff{}) {
		o.Backoff = broker.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}
	}
	if o.PurgeInterval == 0 {
		o.PurgeInterval = -1
	}
	r, err := outbox.NewRelay(p, topic, o)
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

// Rows lists the outbox rows matching f.
func (e *OutboxEnv[Tx]) Rows(f outbox.Filter) []outbox.Row {
	e.T.Helper()
	rows, err := e.OS.ListOutbox(e.Ctx, f)
	if err != nil {
		e.T.Fatal(err)
	}
	return rows
}

// OM is a small outbox message.
func OM(id, aggregate string, version int64, body string) *outbox.Message {
	return &outbox.Message{ID: id, AggregateID: aggregate, Version: version, Type: "test.event", Payload: []byte(body)}
}

// Drain receives and acknowledges everything the subscription can deliver
// now, and returns the deliveries in the order received.
func Drain(t testing.TB, sub *broker.Subscription) []*broker.Message {
	t.Helper()
	var out []*broker.Message
	for {
		ds, err := poll(sub, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return out
		}
		for _, d := range ds {
			out = append(out, d.Message)
			if err := d.Ack(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// ErrFlaky is the error a FlakyTopic fails with (a transient, not-sent
// failure).
var ErrFlaky = errors.New("idemtest: publish failed (injected)")

// FlakyTopic wraps inner in a topic that fails, as a transient error
// certainly not sent, every publish of a batch that contains a message for
// which fail returns true. Its portable layer does not retry.
func FlakyTopic(inner *broker.Topic, fail func(m *broker.Message) bool) *broker.Topic {
	return broker.NewTopic(&flaky{inner: inner, fail: fail}, &broker.TopicOptions{
		Retry: &broker.RetryPolicy{Attempts: 1}, Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
}

// WindowTopic wraps inner in a topic that behaves like a broker with many
// publishes in flight (RabbitMQ with a window of confirms): in a batch
// that contains messages for which fail returns true, those are lost and
// every other message of the batch is delivered, and the batch fails with
// a transient error that may have sent some of it. Its portable layer does
// not retry.
func WindowTopic(inner *broker.Topic, fail func(m *broker.Message) bool) *broker.Topic {
	return broker.NewTopic(&flaky{inner: inner, fail: fail, partial: true}, &broker.TopicOptions{
		Retry: &broker.RetryPolicy{Attempts: 1}, Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
}

// SlowTopic wraps inner in a topic that takes perMessage for each message
// before it publishes a batch, and calls seen with each message it
// publishes: a slow broker that counts.
func SlowTopic(inner *broker.Topic, perMessage time.Duration, seen func(m *broker.Message)) *broker.Topic {
	return broker.NewTopic(&flaky{inner: inner, fail: func(m *broker.Message) bool { seen(m); return false }, slow: perMessage},
		&broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1}, Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
}

type flaky struct {
	inner   *broker.Topic
	fail    func(m *broker.Message) bool
	partial bool // the other messages of a failed batch go through
	slow    time.Duration
	mu      sync.Mutex
}

func (f *flaky) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	if f.slow > 0 {
		t := time.NewTimer(f.slow * time.Duration(len(msgs)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	var ok []*broker.Message
	var failed error
	for _, m := range msgs {
		bm := &broker.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body}
		f.mu.Lock()
		bad := f.fail(bm)
		f.mu.Unlock()
		switch {
		case !bad:
			ok = append(ok, bm)
		case !f.partial:
			return fmt.Errorf("%w: message %s", ErrFlaky, m.ID)
		case failed == nil:
			failed = fmt.Errorf("%w: message %s", ErrFlaky, m.ID)
		}
	}
	if err := f.inner.Publish(ctx, ok...); err != nil {
		return err
	}
	return failed
}

func (f *flaky) Capabilities() capability.Topic { return f.inner.Capabilities() }
func (f *flaky) Classify(err error) driver.ErrorInfo {
	if errors.Is(err, ErrFlaky) {
		return driver.ErrorInfo{Code: driver.Unavailable}
	}
	var be *broker.Error
	if errors.As(err, &be) {
		return driver.ErrorInfo{Code: driver.CodeOf(err), MaybeSent: be.MaybeSent}
	}
	return driver.ErrorInfo{}
}
func (f *flaky) As(any) bool             { return false }
func (f *flaky) ErrorAs(error, any) bool { return false }
func (f *flaky) Close() error            { return nil }
