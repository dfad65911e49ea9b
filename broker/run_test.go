package broker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/driver"
)

// stubSub hands out its messages once, then blocks; SendAcks fails with
// the queued errors first.
type stubSub struct {
	mu      sync.Mutex
	msgs    []*driver.Message
	ackErrs []error
	acks    int
	acked   chan driver.AckID
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
func (s *stubSub) SendNacks(context.Context, []driver.AckID, time.Duration) error { return nil }
func (s *stubSub) SendDeadLetters(context.Context, []driver.AckID, string) error  { return nil }
func (s *stubSub) ExtendLocks(context.Context, []driver.AckID, time.Duration) error {
	return nil
}
func (s *stubSub) Capabilities() driver.Capabilities { return driver.Capabilities{} }
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
