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

// timedStore is the PostgreSQL store with the relay's claims timed: how
// long each claim, the publishing of its batch (from the claim's return to
// Complete) and Complete (mark sent) take. It wraps the store's driver
// with every optional interface the PostgreSQL driver has (listener, wake
// flag, concurrent claims), so that the relay runs
// as it does on the store itself.
type timedStore struct {
	pgDriver
	mu sync.Mutex
	t  relayTiming
}

type pgDriver interface {
	store.Driver[pgx.Tx]
	store.Waker
	store.ConcurrentClaimer
}

func newTimedStore(s *postgres.Store) *timedStore {
	return &timedStore{pgDriver: s.Driver().(pgDriver)}
}

// Driver implements store.Provider: the relay runs on the timed driver.
func (s *timedStore) Driver() store.Driver[pgx.Tx] { return s }

// relayTiming adds up the relay's claims.
type relayTiming struct {
	Claims, Empty, Rows  int
	Claim, Publish, Mark time.Duration
	ClaimEmpty           time.Duration
}

func (s *timedStore) ClaimOutbox(ctx context.Context, r store.OutboxClaim) (store.OutboxBatch, error) {
	start := time.Now()
	b, err := s.pgDriver.ClaimOutbox(ctx, r)
	took := time.Since(start)
	if err != nil {
		return b, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(b.Rows()) == 0 {
		s.t.Empty++
		s.t.ClaimEmpty += took
		return b, nil
	}
	s.t.Claims++
	s.t.Rows += len(b.Rows())
	s.t.Claim += took
	return &timedBatch{OutboxBatch: b, s: s, claimed: time.Now()}, nil
}

func (s *timedStore) timing() relayTiming {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

type timedBatch struct {
	store.OutboxBatch
	s       *timedStore
	claimed time.Time
}

func (b *timedBatch) Complete(ctx context.Context, sent []int64, failed []store.OutboxFailure, at time.Time) error {
	start := time.Now()
	err := b.OutboxBatch.Complete(ctx, sent, failed, at)
	b.s.mu.Lock()
	b.s.t.Publish += start.Sub(b.claimed)
	b.s.t.Mark += time.Since(start)
	b.s.mu.Unlock()
	return err
}

// String gives the means per non-empty claim.
func (t relayTiming) String() string {
	if t.Claims == 0 {
		return fmt.Sprintf("no claims, %d empty", t.Empty)
	}
	per := func(d time.Duration) float64 { return ms(d) / float64(t.Claims) }
	return fmt.Sprintf("%d claims of %.0f rows: claim %.1f ms, publish %.1f ms, mark %.1f ms; %d empty claims (%.1f ms)",
		t.Claims, float64(t.Rows)/float64(t.Claims), per(t.Claim), per(t.Publish), per(t.Mark), t.Empty, ms(t.ClaimEmpty)/max(1, float64(t.Empty)))
}
