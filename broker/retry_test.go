package broker_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/memory"
)

// TestRunBackoffRefused: a Backoff that cannot be used makes Run refuse to
// start, naming the field.
func TestRunBackoffRefused(t *testing.T) {
	b := memory.New(nil)
	defer b.Close()
	if err := b.CreateTopic("t", nil); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("t", "s"); err != nil {
		t.Fatal(err)
	}
	neg := -time.Second
	for name, bo := range map[string]broker.Backoff{
		"Initial":     {Initial: neg},
		"Max":         {Max: neg},
		"Max<Initial": {Initial: time.Minute, Max: time.Second},
		"NaN":         {Multiplier: math.NaN()},
		"Inf":         {Multiplier: math.Inf(1)},
		"negative":    {Multiplier: -2},
	} {
		sub, err := b.OpenSubscription("t", "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = sub.Run(t.Context(), func(context.Context, *broker.Delivery) error { return nil }, &broker.RunOptions{Backoff: bo})
		sub.Close()
		if !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), "RunOptions.Backoff") {
			t.Errorf("%s: %v, want ErrInvalid naming RunOptions.Backoff", name, err)
		}
	}
}

// TestRetryUsesRunsBackoff: a delivery Run hands out is retried after
// RunOptions.Backoff, the one home of that setting, whoever retries it (an
// inbox inside the handler does so with Delivery.Retry): with a one-hour
// backoff of 1000 hours the retried message is not due a second later (the
// default, 100ms at the first attempt, would be), and is 2000 hours later.
func TestRetryUsesRunsBackoff(t *testing.T) {
	clock := memory.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := memory.New(&memory.Options{Clock: clock})
	defer b.Close()
	if err := b.CreateTopic("t", &memory.TopicConfig{Profile: memory.Queue, MessageRetention: 10000 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("t", "s"); err != nil {
		t.Fatal(err)
	}
	top, _ := b.OpenTopic("t", nil)
	defer top.Close()
	if err := top.Publish(t.Context(), &broker.Message{ID: "m", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	sub, _ := b.OpenSubscription("t", "s", nil)
	defer sub.Close()
	rctx, stop := context.WithCancel(t.Context())
	long := broker.Backoff{Initial: 1000 * time.Hour, Max: 1000 * time.Hour, Multiplier: 1}
	err := sub.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
		defer stop()
		return d.Retry(ctx, 0) // as an inbox does after a failed attempt
	}, &broker.RunOptions{Backoff: long})
	if err != nil {
		t.Fatal(err)
	}
	// Full jitter draws the delay from [0, 1000h]: below a second once in
	// 3.6 million runs. A poll with a done context returns what is due.
	clock.Advance(time.Second)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if ds, _ := sub.Receive(done, 1); len(ds) != 0 {
		t.Fatalf("the retried message came back at once: RunOptions.Backoff was not applied")
	}
	clock.Advance(2000 * time.Hour)
	ctx, cancelWait := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancelWait()
	ds, err := sub.Receive(ctx, 1)
	if err != nil || ds[0].Message.ID != "m" || ds[0].Attempt != 2 {
		t.Fatalf("after the backoff: %v, %v; want m, attempt 2", ds, err)
	}
}

// noDelaySub is a broker without delayed nacks and with a 100ms lock: it
// records when it is asked for a nack, and the delay.
type noDelaySub struct {
	mu     sync.Mutex
	msgs   []*driver.Message
	nacked chan nackAt
}

func (s *noDelaySub) ReceiveBatch(ctx context.Context, _ int) ([]*driver.Message, error) {
	s.mu.Lock()
	out := s.msgs
	s.msgs = nil
	s.mu.Unlock()
	if len(out) > 0 {
		return out, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}
func (s *noDelaySub) SendAcks(context.Context, []driver.AckID) error                   { return nil }
func (s *noDelaySub) SendDeadLetters(context.Context, []driver.AckID, string) error    { return nil }
func (s *noDelaySub) ExtendLocks(context.Context, []driver.AckID, time.Duration) error { return nil }
func (s *noDelaySub) Classify(error) driver.ErrorInfo                                  { return driver.ErrorInfo{} }
func (s *noDelaySub) As(any) bool                                                      { return false }
func (s *noDelaySub) ErrorAs(error, any) bool                                          { return false }
func (s *noDelaySub) Close() error                                                     { return nil }

type nackAt struct {
	at    time.Time
	delay time.Duration
}

func (s *noDelaySub) Capabilities() capability.Subscription {
	return capability.Subscription{LockTimeout: 100 * time.Millisecond}
}
func (s *noDelaySub) SendNacks(_ context.Context, _ []driver.AckID, d time.Duration) error {
	s.nacked <- nackAt{time.Now(), d}
	return nil
}

// TestRetryWithoutNackDelay: on a broker that cannot delay a nack, Retry
// waits the backoff out itself, capped at half the lock timeout (here 50ms
// of a one-hour backoff), then nacks without delay.
func TestRetryWithoutNackDelay(t *testing.T) {
	s := &noDelaySub{msgs: []*driver.Message{{ID: "m", AckID: 1, Attempt: 1}}, nacked: make(chan nackAt, 1)}
	sub := broker.NewSubscription(s, nil)
	ctx, stop := context.WithCancel(t.Context())
	var returned time.Time
	nacked := make(chan nackAt, 1)
	go func() {
		n := <-s.nacked
		nacked <- n
		stop()
	}()
	err := sub.Run(ctx, func(context.Context, *broker.Delivery) error {
		returned = time.Now()
		return errors.New("boom")
	}, &broker.RunOptions{Backoff: broker.Backoff{Initial: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	n := <-nacked
	if took := n.at.Sub(returned); n.delay != 0 || took < 50*time.Millisecond || took > 10*time.Second {
		t.Fatalf("nacked with delay %s after waiting %s; want no delay, after half the lock timeout (50ms)", n.delay, took)
	}
}
