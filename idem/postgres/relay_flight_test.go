package postgres_test

import (
	"github.com/wary-go/wary/broker"

	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
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
	box, err := outbox.New[pgx.Tx](st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := &claimCounter{pgDriver: st.Driver().Impl().(pgDriver), st: st, started: make(chan struct{}, 1024)}
	hooked, err := postgres.Hooked(st, postgres.SourceOptions{Pipeline: 2}, cs, cs.claim)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	g := &gate{entered: make(chan string, 1), release: make(chan struct{}), ctx: rctx}
	r, err := outbox.NewRelay(hooked, outboxBroker(t).Topic, &outbox.RelayOptions{Owner: "r", PollInterval: time.Minute, BatchSize: batchSize,
		PurgeInterval: -1, Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() {
		if err := r.Run(failpoint.WithAfterPublish(rctx, g.after)); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(ctx, t, "the relay listening", func() bool { return r.Stats().Listening })
	tx, err := idemtest.D(st).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := box.Add(ctx, tx, &outbox.Message{AggregateID: "b", Type: "x", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := idemtest.D(st).Commit(ctx, tx); err != nil {
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
	for drained := false; !drained; { // the claims made before b:1 was held
		select {
		case <-cs.started:
		default:
			drained = true
		}
	}
	twoClaims := make(chan struct{})
	go func() {
		for range 2 {
			select {
			case <-cs.started:
			case <-rctx.Done():
				return
			}
		}
		close(twoClaims)
	}()
	if batchSize > 1 {
		select {
		case <-twoClaims:
		case <-ctx.Done():
			t.Fatal("behind a small batch, the other loop stopped polling")
		}
	} else {
		select {
		case <-twoClaims:
			t.Fatal("a claim loop claimed again while the other's large batch was in flight")
		case <-time.After(300 * time.Millisecond):
		}
	}
	close(g.release)
	waitFor(ctx, t, "b:1 marked", func() bool { return r.Stats().Published == 1 })
}

// claimCounter tells of each claim a relay starts on its store (dropped
// while started is full), and never lets the relay set its wake flag.
type claimCounter struct {
	pgDriver
	st      *postgres.Store
	started chan struct{}
}

func (s *claimCounter) claim(ctx context.Context, c sqlcore.Claim) (sqlcore.Batch, error) {
	select {
	case s.started <- struct{}{}:
	default:
	}
	return postgres.ClaimOutbox(ctx, s.st, c)
}

// IdleOutbox never sets the relay's flag, as when adding transactions
// are in flight.
func (s *claimCounter) IdleOutbox(context.Context, string, time.Duration) (bool, error) {
	return false, nil
}
