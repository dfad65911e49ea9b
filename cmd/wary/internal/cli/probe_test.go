package cli_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/memory"
)

// liarHarness is a memory broker of the queue profile, which keeps no
// order and drops no duplicate, behind drivers that declare order per
// message group and a one-minute dedup window.
func liarHarness(_ context.Context, _ *url.URL, _ func(string) string) (conformance.Harness, func(), error) {
	clock := memory.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := memory.New(&memory.Options{Clock: clock})
	n := 0
	h := conformance.Harness{
		Name:              "liar",
		RedeliveryHorizon: memory.DefaultMessageRetention,
		Setup: func(ctx context.Context, t conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			n++
			name := "liar-" + time.Now().Format("150405.000000000") + "-" + string(rune('a'+n%26))
			if err := b.CreateTopic(name, &memory.TopicConfig{Profile: memory.Queue, LockTimeout: cfg.LockTimeout, DeliveryLimit: cfg.DeliveryLimit}); err != nil {
				return nil, err
			}
			if err := b.CreateSubscription(name, "sub"); err != nil {
				return nil, err
			}
			top, err := b.OpenTopic(name, nil)
			if err != nil {
				return nil, err
			}
			caps := top.Capabilities()
			caps.OrderingKey = "MessageGroupId"
			caps.DedupWindow, caps.DedupScope = time.Minute, capability.DedupQueue
			subCaps := memory.TopicConfig{Profile: memory.Queue, LockTimeout: cfg.LockTimeout, DeliveryLimit: cfg.DeliveryLimit}.SubscriptionCapabilities()
			subCaps.Ordering, subCaps.HeadOfLine = capability.OrderMessageGroup, true
			return &conformance.Fixture{
				Topic: broker.NewTopic(&lyingTopic{t: top, caps: caps}, nil),
				Subscribe: func(context.Context) (*broker.Subscription, error) {
					s, err := b.OpenSubscription(name, "sub", nil)
					if err != nil {
						return nil, err
					}
					return broker.NewSubscription(&lyingSub{s: s, caps: subCaps}, nil), nil
				},
				DeadLetters: func(context.Context) (*broker.Subscription, error) { return b.OpenDeadLetters(name, "sub", nil) },
			}, nil
		},
		Wait:    func(_ context.Context, d time.Duration) { clock.Advance(d) },
		Quiet:   100 * time.Millisecond,
		MaxWait: 24 * time.Hour,
	}
	return h, func() { b.Close() }, nil
}

func classify(err error) driver.ErrorInfo {
	for _, c := range []struct {
		err  error
		code driver.ErrorCode
	}{{broker.ErrNotFound, driver.NotFound}, {broker.ErrTooLarge, driver.TooLarge}, {broker.ErrInvalid, driver.Invalid},
		{broker.ErrClosed, driver.Closed}, {broker.ErrLockLost, driver.LockLost}, {context.Canceled, driver.Canceled},
		{context.DeadlineExceeded, driver.DeadlineExceeded}} {
		if errors.Is(err, c.err) {
			return driver.ErrorInfo{Code: c.code}
		}
	}
	return driver.ErrorInfo{Code: driver.Unknown}
}

// lyingTopic publishes through a real topic and declares caps.
type lyingTopic struct {
	t    *broker.Topic
	caps capability.Topic
}

func (l *lyingTopic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	out := make([]*broker.Message, len(msgs))
	for i, m := range msgs {
		out[i] = &broker.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body}
	}
	return l.t.Publish(ctx, out...)
}
func (l *lyingTopic) Capabilities() capability.Topic      { return l.caps }
func (l *lyingTopic) Classify(err error) driver.ErrorInfo { return classify(err) }
func (l *lyingTopic) As(any) bool                         { return false }
func (l *lyingTopic) ErrorAs(error, any) bool             { return false }
func (l *lyingTopic) Close() error                        { return l.t.Close() }

// lyingSub receives through a real subscription and declares caps.
type lyingSub struct {
	s    *broker.Subscription
	caps capability.Subscription
}

func (l *lyingSub) ReceiveBatch(ctx context.Context, n int) ([]*driver.Message, error) {
	ds, err := l.s.Receive(ctx, n)
	out := make([]*driver.Message, len(ds))
	for i, d := range ds {
		m := d.Message
		out[i] = &driver.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body, AckID: d, Attempt: d.Attempt, Redelivered: d.Redelivered}
	}
	return out, err
}

func (l *lyingSub) each(ids []driver.AckID, f func(d *broker.Delivery) error) error {
	var errs []error
	for _, id := range ids {
		errs = append(errs, f(id.(*broker.Delivery)))
	}
	return errors.Join(errs...)
}

func (l *lyingSub) SendAcks(ctx context.Context, ids []driver.AckID) error {
	return l.each(ids, func(d *broker.Delivery) error { return d.Ack(ctx) })
}
func (l *lyingSub) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	return l.each(ids, func(d *broker.Delivery) error { return d.Nack(ctx, delay) })
}
func (l *lyingSub) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	return l.each(ids, func(d *broker.Delivery) error { return d.DeadLetter(ctx, reason) })
}
func (l *lyingSub) ExtendLocks(ctx context.Context, ids []driver.AckID, dur time.Duration) error {
	return l.each(ids, func(d *broker.Delivery) error { return d.ExtendLock(ctx, dur) })
}
func (l *lyingSub) Capabilities() capability.Subscription { return l.caps }
func (l *lyingSub) Classify(err error) driver.ErrorInfo   { return classify(err) }
func (l *lyingSub) As(any) bool                           { return false }
func (l *lyingSub) ErrorAs(error, any) bool               { return false }
func (l *lyingSub) Close() error                          { return l.s.Close() }

// TestProbeCatchesALie: a broker that declares a dedup window it does
// not keep is caught, with exit 1; what it keeps is reported kept.
func TestProbeCatchesALie(t *testing.T) {
	w := newWary(t)
	w.harnesses = map[string]cli.HarnessFunc{"liar": liarHarness}
	r := w.want(cli.ExitFinding, "probe", "liar://scratch", "--only", "dedup-within-window,round-trip-fidelity")
	r.has(t, "dedup-within-window", "dedup 1m0s per queue", "BROKEN: ", "round-trip-fidelity", "kept", "the broker does not keep what it declares")
	var res struct {
		Broken  bool
		Results []struct{ Scenario, Outcome, Declared string }
	}
	w.want(cli.ExitFinding, "probe", "liar://scratch", "--only", "dedup-within-window", "--json").json(t, &res)
	if !res.Broken || len(res.Results) != 1 || res.Results[0].Outcome != string(conformance.Broken) {
		t.Fatalf("probe --json: %+v, want dedup-within-window broken", res)
	}
}

// TestProbeMemoryKeepsItsWord: the memory driver's SQS FIFO profile keeps
// every promise it declares.
func TestProbeMemoryKeepsItsWord(t *testing.T) {
	w := newWary(t)
	r := w.want(cli.ExitOK, "probe", "mem://scratch?profile=sqsfifo")
	r.has(t, "order-within-scope", "order per message group", "dedup-expires-after-window", "dedup 5m0s per queue",
		"delivery-limit-dead-letters", "limit 10 (native)", "every observation matches the declaration",
		"measured on scratch entities it created and deleted (not on that entity itself)")
	if r.errout == "" {
		t.Errorf("no progress on stderr")
	}
}

func TestProbeUnknownScheme(t *testing.T) {
	w := newWary(t)
	r := w.want(cli.ExitError, "probe", "nosuch://x")
	if want := "probe cannot create scratch queues for nosuch://"; !strings.Contains(r.errout, want) {
		t.Errorf("stderr %q lacks %q", r.errout, want)
	}
	w.want(cli.ExitError, "probe", "mem://x", "--only", "no-such-scenario")
}
