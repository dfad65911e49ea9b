package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/idem/store"
)

// timedStore is the PostgreSQL store with the relay's batches timed: how
// long the publishing of each batch (from the source's Next to Settle) and
// its Settle (mark sent) take. It wraps the store's driver, and the source
// it hands out, so that the relay runs as it does on the store itself.
type timedStore struct {
	pgDriver
	mu sync.Mutex
	t  relayTiming
}

func newTimedStore(s *postgres.Store) *timedStore {
	return &timedStore{pgDriver: s.Driver()}
}

type pgDriver = store.Driver[pgx.Tx]

// Driver implements store.Provider: the relay runs on the timed driver.
func (s *timedStore) Driver() store.Driver[pgx.Tx] { return s }

// relayTiming adds up the relay's batches.
type relayTiming struct {
	Batches, Rows int
	Publish, Mark time.Duration
}

// OutboxSource implements store.RelayStore: the store's source, timed.
func (s *timedStore) OutboxSource(ctx context.Context, c store.SourceConfig) (store.Source, error) {
	src, err := s.pgDriver.OutboxSource(ctx, c)
	if err != nil {
		return nil, err
	}
	return &timedSource{Source: src, s: s, taken: map[*store.Batch]time.Time{}}, nil
}

func (s *timedStore) timing() relayTiming {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

// timedSource times the batches of a source.
type timedSource struct {
	store.Source
	s     *timedStore
	mu    sync.Mutex
	taken map[*store.Batch]time.Time
}

func (t *timedSource) Next(ctx context.Context, wait bool) (*store.Batch, error) {
	b, err := t.Source.Next(ctx, wait)
	if b != nil {
		t.mu.Lock()
		t.taken[b] = time.Now()
		t.mu.Unlock()
	}
	return b, err
}

func (t *timedSource) Settle(ctx context.Context, b *store.Batch, out *store.Outcome) error {
	start := time.Now()
	err := t.Source.Settle(ctx, b, out)
	t.mu.Lock()
	taken := t.taken[b]
	delete(t.taken, b)
	t.mu.Unlock()
	t.s.mu.Lock()
	t.s.t.Batches++
	t.s.t.Rows += len(b.Rows)
	t.s.t.Publish += start.Sub(taken)
	t.s.t.Mark += time.Since(start)
	t.s.mu.Unlock()
	return err
}

// String gives the means per batch.
func (t relayTiming) String() string {
	if t.Batches == 0 {
		return "no batches"
	}
	per := func(d time.Duration) float64 { return ms(d) / float64(t.Batches) }
	return fmt.Sprintf("%d batches of %.0f rows: publish %.1f ms, mark %.1f ms",
		t.Batches, float64(t.Rows)/float64(t.Batches), per(t.Publish), per(t.Mark))
}
