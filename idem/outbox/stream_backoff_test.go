package outbox_test

import (
	"github.com/wary-go/wary/broker"

	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
	"github.com/wary-go/wary/idem/store"
)

// streamer is a SQLite store's driver that streams through open.
type streamer struct {
	store.Driver[*sql.Tx]
	open func() store.OutboxStream
}

// provider hands out a driver.
type provider struct{ d store.Driver[*sql.Tx] }

func (p provider) Driver() store.Driver[*sql.Tx] { return p.d }

func (s streamer) OpenOutboxStream(context.Context, string) (store.OutboxStream, error) {
	return s.open(), nil
}

func (streamer) OutboxStreamStatus(context.Context) (store.OutboxStreamStatus, error) {
	return store.OutboxStreamStatus{}, nil
}

// brokenStream fails its first Recv, or, if it is to make progress, its
// second, once the relay confirmed the position the first returned.
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
func (s *brokenStream) Publishable(_ context.Context, rows, _ []store.OutboxRow) ([]store.OutboxRow, int, error) {
	return rows, 0, nil
}
func (s *brokenStream) Horizon(context.Context) (time.Time, uint64, error) { return time.Now(), 1, nil }
func (s *brokenStream) Settle(context.Context, []int64, []store.OutboxFailure, []int64, time.Time) error {
	return nil
}
func (s *brokenStream) Confirm(uint64)              { s.once.Do(func() { close(s.confirmed) }) }
func (s *brokenStream) Close(context.Context) error { return nil }

func (s *brokenStream) Recv(ctx context.Context) (store.StreamEvent, error) {
	s.recvs++
	if s.progress && s.recvs == 1 {
		return store.StreamEvent{Pos: 100}, nil // a keepalive, confirmed at once
	}
	if s.progress {
		select {
		case <-s.confirmed:
		case <-ctx.Done():
			return store.StreamEvent{}, ctx.Err()
		}
	}
	return store.StreamEvent{}, errBroken
}

// TestStreamReopensWithBackoff: a stream that fails as soon as it is
// opened is opened again after PollInterval, then twice as long each time,
// up to StreamRetry, never at once; a stream that made progress (confirmed
// a position) before it failed starts the backoff over.
func TestStreamReopensWithBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := memory.New(nil)
	defer b.Close()
	if err := b.CreateTopic("events", nil); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()

	opens := 0
	s := streamer{Driver: st.Driver(), open: func() store.OutboxStream {
		opens++
		if opens > 8 {
			cancel() // opened more often than the test lets it wait: a loop
		}
		// The sixth stream makes progress before it fails.
		return &brokenStream{progress: opens == 6, confirmed: make(chan struct{})}
	}}
	const poll, retry = 10 * time.Millisecond, 80 * time.Millisecond
	r, err := outbox.NewRelay(provider{s}, topic, &outbox.RelayOptions{Stream: true, PollInterval: poll, StreamRetry: retry, PurgeInterval: -1,
		Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	outbox.SetPause(r, func(_ context.Context, d time.Duration) bool {
		waits = append(waits, d)
		if len(waits) == 8 {
			cancel()
			return false
		}
		return true
	})
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []time.Duration{poll, 2 * poll, 4 * poll, retry, retry, poll, 2 * poll, 4 * poll}
	if !slices.Equal(waits, want) || opens != 8 {
		t.Fatalf("opened the stream %d times, waiting %v between; want 8, waiting %v", opens, waits, want)
	}
	if s := r.Stats(); s.LastError == "" {
		t.Errorf("stats %+v: no last error", s)
	}
}
