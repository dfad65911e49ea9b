package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// stubSub hands out its messages once, then blocks; SendAcks fails with
// the queued errors first.
type stubSub struct {
	mu       sync.Mutex
	msgs     []*driver.Message
	ackErrs  []error
	acks     int
	nacks    int
	acked    chan driver.AckID
	prefetch []int
}

var errTransient = errors.New("channel closed, reconnecting")

func (s *stubSub) ReceiveBatch(ctx context.Context, max int) ([]*driver.Message, error) {
	s.mu.Lock()
	if len(s.msgs) > 0 {
		n := min(max, len(s.msgs))
		out := s.msgs[:n]
		s.msgs = s.msgs[n:]
		s.mu.Unlock()
		return out, nil
	}
	s.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *stubSub) SendAcks(_ context.Context, ids []driver.AckID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acks++
	if len(s.ackErrs) > 0 {
		err := s.ackErrs[0]
		s.ackErrs = s.ackErrs[1:]
		return err
	}
	for _, id := range ids {
		s.acked <- id
	}
	return nil
}
func (s *stubSub) SendNacks(context.Context, []driver.AckID, time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nacks++
	return nil
}

// prefetchSub is a stubSub that records SetPrefetch calls.
type prefetchSub struct{ stubSub }

func (s *prefetchSub) SetPrefetch(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prefetch = append(s.prefetch, n)
	return nil
}
func (s *stubSub) SendDeadLetters(context.Context, []driver.AckID, string) error { return nil }
func (s *stubSub) ExtendLocks(context.Context, []driver.AckID, time.Duration) error {
	return nil
}
func (s *stubSub) Capabilities() capability.Subscription {
	return capability.Subscription{}
}
func (s *stubSub) Classify(err error) driver.ErrorInfo {
	if errors.Is(err, errTransient) {
		return driver.ErrorInfo{Code: driver.Unavailable}
	}
	return driver.ErrorInfo{}
}
func (s *stubSub) As(any) bool             { return false }
func (s *stubSub) ErrorAs(error, any) bool { return false }
func (s *stubSub) Close() error            { return nil }

func TestRunRetriesTransientSettle(t *testing.T) {
	d := &stubSub{
		msgs:    []*driver.Message{{ID: "m1", AckID: 1}},
		ackErrs: []error{errTransient, errTransient},
		acked:   make(chan driver.AckID, 1),
	}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, func(context.Context, *Delivery) error { return nil }, nil)
	}()
	if id := <-d.acked; id != 1 {
		t.Fatalf("acked %v", id)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d.acks != 3 {
		t.Fatalf("ack attempts = %d, want 3 (two transient failures, then success)", d.acks)
	}
}

// A handler that acked after its commit and saw the ack fail (idem's
// ErrAckAfterCommit) returns an error; the loop must retry the ack, not
// nack an effect that is in place.
func TestRunRetriesFailedAckInsteadOfNack(t *testing.T) {
	d := &stubSub{
		msgs:    []*driver.Message{{ID: "m1", AckID: 1}},
		ackErrs: []error{errTransient},
		acked:   make(chan driver.AckID, 1),
	}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, func(ctx context.Context, dl *Delivery) error {
			if err := dl.Ack(ctx); err != nil {
				return errors.New("committed, but the ack failed")
			}
			return nil
		}, nil)
	}()
	if id := <-d.acked; id != 1 {
		t.Fatalf("acked %v", id)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d.acks != 2 || d.nacks != 0 {
		t.Fatalf("acks = %d, nacks = %d; want the failed ack retried (2) and no nack", d.acks, d.nacks)
	}
}

func TestRunSetsPrefetchFromConcurrency(t *testing.T) {
	d := &prefetchSub{stubSub{acked: make(chan driver.AckID, 1)}}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sub.Run(ctx, func(context.Context, *Delivery) error { return nil }, &RunOptions{Concurrency: 8}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(d.prefetch) != 1 || d.prefetch[0] != 16 {
		t.Fatalf("SetPrefetch calls = %v, want [16] (2 × Concurrency)", d.prefetch)
	}
}

func TestDetachedDelivery(t *testing.T) {
	d := NewDetachedDelivery(&Message{ID: "x"}, 3)
	if !d.Detached() || d.Attempt != 3 || !d.Redelivered {
		t.Fatalf("detached delivery: %+v", d)
	}
	ctx := context.Background()
	if err := d.ExtendLock(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := d.Nack(ctx, time.Minute); err != nil || !d.Settled() {
		t.Fatalf("Nack: %v, settled %t", err, d.Settled())
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestExtendLockRejectsNonPositive(t *testing.T) {
	d := NewDetachedDelivery(&Message{ID: "x"}, 1)
	for _, dur := range []time.Duration{0, -time.Second} {
		if err := d.ExtendLock(context.Background(), dur); !errors.Is(err, ErrInvalid) {
			t.Errorf("ExtendLock(%s) = %v, want ErrInvalid", dur, err)
		}
	}
}

// lockSub is a stubSub whose locks expire and can be extended; it reports
// every extension.
type lockSub struct {
	stubSub
	extended chan time.Duration
}

func (s *lockSub) Capabilities() capability.Subscription {
	return capability.Subscription{LockTimeout: 20 * time.Millisecond, LockExtendable: true}
}

func (s *lockSub) ExtendLocks(_ context.Context, _ []driver.AckID, d time.Duration) error {
	select {
	case s.extended <- d:
	default:
	}
	return nil
}

// While a handler runs, Run keeps its delivery's lock: the handler returns
// only after it has seen three renewals, each by the lock timeout.
func TestRunRenewsLocksWhileHandling(t *testing.T) {
	d := &lockSub{stubSub: stubSub{msgs: []*driver.Message{{ID: "m1", AckID: 1}}, acked: make(chan driver.AckID, 1)}, extended: make(chan time.Duration, 1)}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, func(ctx context.Context, _ *Delivery) error {
			for i := 0; i < 3; i++ {
				if got := <-d.extended; got != 20*time.Millisecond {
					t.Errorf("extended by %s, want the lock timeout", got)
				}
			}
			return nil
		}, nil)
	}()
	<-d.acked
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRunMiddleware: RunOptions.Middleware wraps the handler, the first
// outermost.
func TestRunMiddleware(t *testing.T) {
	d := &stubSub{msgs: []*driver.Message{{ID: "m", AckID: 1}}, acked: make(chan driver.AckID, 1)}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var trace []string
	mark := func(name string) Middleware {
		return func(h Handler) Handler {
			return func(ctx context.Context, d *Delivery) error {
				trace = append(trace, name)
				return h(ctx, d)
			}
		}
	}
	h := func(context.Context, *Delivery) error {
		trace = append(trace, "handler")
		cancel()
		return nil
	}
	if err := sub.Run(ctx, h, &RunOptions{Middleware: []Middleware{mark("a"), mark("b")}}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := fmt.Sprint(trace); got != "[a b handler]" {
		t.Fatalf("trace %s, want [a b handler]", got)
	}
}

// deadlineSub records, for each SendAcks, how long its ctx had left.
type deadlineSub struct {
	stubSub
	left []time.Duration // -1: no deadline
}

func (s *deadlineSub) SendAcks(ctx context.Context, ids []driver.AckID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	s.left = append(s.left, left)
	return nil
}

// TestSettleWithoutDeadlineIsBounded: an Ack or AckAll whose ctx has no
// deadline reaches the driver bounded by SettleTimeout; one with a
// deadline keeps it.
func TestSettleWithoutDeadlineIsBounded(t *testing.T) {
	d := &deadlineSub{stubSub: stubSub{msgs: []*driver.Message{{ID: "a", AckID: 1}, {ID: "b", AckID: 2}, {ID: "c", AckID: 3}, {ID: "d", AckID: 4}}}}
	sub := NewSubscription(d, &SubscriptionOptions{SettleTimeout: time.Minute})
	defer sub.Close()
	ds, err := sub.Receive(t.Context(), 4)
	if err != nil || len(ds) != 4 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	if err := ds[0].Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
	if errs := AckAll(context.Background(), ds[1:3]); errs != nil {
		t.Fatal(errs)
	}
	long, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := ds[3].Ack(long); err != nil {
		t.Fatal(err)
	}
	if len(d.left) != 3 {
		t.Fatalf("SendAcks calls %d, want 3", len(d.left))
	}
	for i, left := range d.left[:2] {
		if left <= 0 || left > time.Minute {
			t.Errorf("settle %d without a deadline reached the driver with %v left, want within SettleTimeout (1m)", i, left)
		}
	}
	if d.left[2] <= time.Minute {
		t.Errorf("a settle with its own deadline (1h) reached the driver with %v left", d.left[2])
	}
}
