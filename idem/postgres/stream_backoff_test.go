package postgres

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// brokenStream fails its first Recv, or, if it is to make progress, its
// second, once the source confirmed the position the first returned.
type brokenStream struct {
	progress  bool
	recvs     int
	confirmed chan struct{}
	once      sync.Once
}

var errBroken = errors.New("the stream broke (injected)")

func (s *brokenStream) Fresh() bool                         { return false }
func (s *brokenStream) Drained(context.Context) error       { return nil }
func (s *brokenStream) Clear(context.Context) (bool, error) { return true, nil }
func (s *brokenStream) Publishable(_ context.Context, rows, _ []outbox.Row) ([]outbox.Row, int, error) {
	return rows, 0, nil
}
func (s *brokenStream) Horizon(context.Context) (time.Time, uint64, error) { return time.Now(), 1, nil }
func (s *brokenStream) Settle(context.Context, []int64, []seam.OutboxFailure, []int64, time.Time) (int, error) {
	return 0, nil
}
func (s *brokenStream) Confirm(uint64)              { s.once.Do(func() { close(s.confirmed) }) }
func (s *brokenStream) Close(context.Context) error { return nil }

func (s *brokenStream) Recv(ctx context.Context) (streamEvent, error) {
	s.recvs++
	if s.progress && s.recvs == 1 {
		return streamEvent{Pos: 100}, nil // a keepalive, confirmed at once
	}
	if s.progress {
		select {
		case <-s.confirmed:
		case <-ctx.Done():
			return streamEvent{}, ctx.Err()
		}
	}
	return streamEvent{}, errBroken
}

// TestStreamReopensWithBackoff: a stream that fails as soon as it is
// opened is opened again after PollInterval, then twice as long each time,
// up to StreamRetry, never at once; a stream that made progress (confirmed
// a position) before it failed starts the backoff over.
func TestStreamReopensWithBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	opens := 0
	const poll, retry = 10 * time.Millisecond, 80 * time.Millisecond
	var notes []string
	c := seam.SourceConfig{Owner: "r", BatchSize: 10, PollInterval: poll, Now: time.Now, Logger: slog.New(slog.DiscardHandler),
		Note:  func(op string, err error) { notes = append(notes, op+": "+err.Error()) },
		Woken: func() <-chan struct{} { return nil }, Changed: func() <-chan struct{} { return nil }}
	o := SourceOptions{Stream: true, StreamRetry: retry, WALBudget: -1} // no server: no slot to check
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	s := (&driver{}).streamSource(c, o)
	s.open = func(context.Context, string) (logStream, error) {
		opens++
		if opens > 8 {
			cancel() // opened more often than the test lets it wait: a loop
		}
		// The sixth stream makes progress before it fails.
		return &brokenStream{progress: opens == 6, confirmed: make(chan struct{})}, nil
	}
	var waits []time.Duration
	s.pause = func(_ context.Context, d time.Duration) bool {
		waits = append(waits, d)
		if len(waits) == 8 {
			cancel()
			return false
		}
		return true
	}
	if b, err := s.Next(ctx, true); b != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v, %v; want nothing, canceled", b, err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{poll, 2 * poll, 4 * poll, retry, retry, poll, 2 * poll, 4 * poll}
	if !slices.Equal(waits, want) || opens != 8 {
		t.Fatalf("opened the stream %d times, waiting %v between; want 8, waiting %v", opens, waits, want)
	}
	if len(notes) == 0 {
		t.Errorf("no failure noted")
	}
}
