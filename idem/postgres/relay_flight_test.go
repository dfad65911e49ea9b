package postgres_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/postgres"
	idemstore "github.com/wary-go/wary/idem/store"
)

// TestRelayWaitsForBatchInFlight: a relay with two claim loops, under a
// steady stream of adds (the store never lets it set its wake flag, as
// when adding transactions are always in flight, so it polls every
// millisecond), one loop holding a large batch in flight (BatchSize 1; its
// publish blocked). The other loop's claim finds nothing (the batch holds
// the only aggregate's head), and it then waits for the batch to be marked
// instead of claiming again every millisecond: on few aggregates such
// claims find the heads the batch holds, each at the cost of a full claim.
// Before, the other loop claimed about every millisecond while the batch
// was held.
//
// Behind a small batch (one row, BatchSize 3) the relay keeps up with the
// adds, a claim that found nothing found nothing new, and the other loop
// polls as before.
func TestRelayWaitsForBatchInFlight(t *testing.T) {
	t.Run("large", func(t *testing.T) { relayWaitsForBatch(t, 1) })
	t.Run("small", func(t *testing.T) { relayWaitsForBatch(t, 3) })
}

func relayWaitsForBatch(t *testing.T, batchSize int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := newListenStore(ctx, t)
	outbox, err := idem.NewOutbox[pgx.Tx](st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := &claimCounter{Store: st, reached: map[int64]chan struct{}{}}
	rctx, stop := context.WithCancel(ctx)
	g := &gate{entered: make(chan string, 1), release: make(chan struct{}), ctx: rctx}
	r, err := idem.NewRelay(cs, outboxBroker(t).Topic, &idem.RelayOptions{Owner: "r", PollInterval: time.Minute, Pipeline: 2, BatchSize: batchSize,
		PurgeInterval: -1, AfterPublish: g.after, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() {
		if err := r.Run(rctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(ctx, t, "the relay listening", func() bool { return r.Stats().Listening })
	tx, err := st.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Add(ctx, tx, &idem.OutboxMessage{AggregateID: "b", Type: "x", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-ctx.Done():
		t.Fatal("b:1 was not published")
	}
	// The other loop may still make one claim (it may have found nothing
	// before the batch counted as in flight); a second one while b:1 is
	// held is the polling this test rules out. No signal tells that a loop
	// waits, so the test gives it well over a hundred poll intervals.
	again := cs.at(cs.claims.Load() + 2)
	if batchSize > 1 {
		select {
		case <-again:
		case <-ctx.Done():
			t.Fatal("behind a small batch, the other loop stopped polling")
		}
	} else {
		select {
		case <-again:
			t.Fatal("a claim loop claimed again while the other's large batch was in flight")
		case <-time.After(300 * time.Millisecond):
		}
	}
	close(g.release)
	waitFor(ctx, t, "b:1 marked", func() bool { return r.Stats().Published == 1 })
}

// claimCounter counts a store's claims, and closes at(n) when the n-th
// starts. It never lets a relay set its wake flag.
type claimCounter struct {
	*postgres.Store
	claims  atomic.Int64
	mu      sync.Mutex
	reached map[int64]chan struct{}
}

func (s *claimCounter) ClaimOutbox(ctx context.Context, c idemstore.OutboxClaim) (idemstore.OutboxBatch, error) {
	n := s.claims.Add(1)
	s.mu.Lock()
	if ch, ok := s.reached[n]; ok {
		close(ch)
	} else {
		ch = make(chan struct{})
		close(ch)
		s.reached[n] = ch
	}
	s.mu.Unlock()
	return s.Store.ClaimOutbox(ctx, c)
}

// IdleOutbox never sets the relay's flag, as when adding transactions
// are in flight.
func (s *claimCounter) IdleOutbox(context.Context, string, time.Duration) (bool, error) {
	return false, nil
}

func (s *claimCounter) at(n int64) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims.Load() >= n {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	ch, ok := s.reached[n]
	if !ok {
		ch = make(chan struct{})
		s.reached[n] = ch
	}
	return ch
}
