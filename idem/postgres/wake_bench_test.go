package postgres_test

import (
	"github.com/wary-go/wary/broker"

	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// BenchmarkProducerCommits: the commit rate of 8 producers, each
// committing transactions of one outbox row, on six stores in interleaved
// rounds of 2,000 commits, the order rotated each round: "nowake" runs no
// wake-up at all and no relay;
// "poll" runs no wake-up, with a relay polling every millisecond and
// publishing the rows (to the memory broker), during its round only;
// "wake" is the store as shipped (one statement per add), with a relay
// listening and publishing the rows; "notifyall" notifies on every commit
// (a wake flag is set and no relay clears it), as the outbox did before
// the flag. "nowake2" and "wake2" are "nowake" and "wake" with the two
// statements per add of earlier versions (the counters, then the rows).
// wake/nowake-% is the target (>= 90); wake/poll-% compares with a relay
// that is never notified; wake/wake2-% is the one-statement add's gain.
func BenchmarkProducerCommits(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nowake, poll, wake, all := newListenStore(ctx, b), newListenStore(ctx, b), newListenStore(ctx, b), newListenStore(ctx, b)
	nowake2, wake2 := newListenStore(ctx, b), newListenStore(ctx, b)
	postgres.NoWake(nowake)
	postgres.NoWake(poll)
	postgres.NoWakeTwoStatements(nowake2)
	postgres.TwoStatementAdd(wake2)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	relay := func(st *postgres.Store, o *outbox.RelayOptions) *outbox.Relay {
		o.PurgeInterval, o.Logger = -1, slog.New(slog.DiscardHandler)
		r, err := outbox.NewRelay(st, outboxBroker(b).Topic, o)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(ctx) })
		return r
	}
	// A wake flag no relay clears: every adding transaction notifies.
	if ok, err := all.Driver().Impl().(idler).IdleOutbox(ctx, "notifyall", time.Hour); !ok || err != nil {
		b.Fatalf("IdleOutbox: %v, %v", ok, err)
	}
	r := relay(wake, &outbox.RelayOptions{Owner: "wake"})
	r2 := relay(wake2, &outbox.RelayOptions{Owner: "wake2"})
	drained := func(r *outbox.Relay, n int64) {
		for deadline := time.Now().Add(time.Minute); r.Stats().Published < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("relay %s: %d of %d rows published after a minute", r.Owner(), r.Stats().Published, n)
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !r.Stats().Listening || !r2.Stats().Listening; {
		if time.Now().After(deadline) {
			b.Fatal("the relay is not listening")
		}
		time.Sleep(time.Millisecond)
	}
	// Count the notifying commits of wake and wake2.
	notified := func(st *postgres.Store) *atomic.Int64 {
		var n atomic.Int64
		ready := make(chan struct{})
		wg.Go(func() {
			_ = st.Driver().Impl().(listener).ListenOutbox(ctx, func() {
				select {
				case <-ready:
					n.Add(1)
				default:
					close(ready)
				}
			})
		})
		<-ready
		return &n
	}
	n1, n2 := notified(wake), notified(wake2)
	const producers, round = 8, 2000
	stores := []*postgres.Store{nowake, poll, wake, all, nowake2, wake2}
	startPoll := func() (*outbox.Relay, func()) {
		noListen, err := poll.WithSource(postgres.SourceOptions{NoListen: true})
		if err != nil {
			b.Fatal(err)
		}
		pr, err := outbox.NewRelay(noListen, outboxBroker(b).Topic, &outbox.RelayOptions{Owner: "poll",
			PollInterval: time.Millisecond, PurgeInterval: -1, Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
		if err != nil {
			b.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() { defer close(stopped); _ = pr.Run(pctx) }()
		return pr, func() { cancel(); <-stopped }
	}
	var took [6]time.Duration
	var wakeRows, wake2Rows int64
	seq := 0
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		for k := range stores {
			// The order rotates each round, so that no store always
			// follows the same one (autovacuum after the polling relay's
			// round, say).
			i := (k + seq) % len(stores)
			st := stores[i]
			ob, err := outbox.New[pgx.Tx](st, nil)
			if err != nil {
				b.Fatal(err)
			}
			// The polling relay runs during its own round only (its polls
			// would load the others), and each relay publishes its round's
			// rows before the next round starts.
			var pr *outbox.Relay
			stopPoll := func() {}
			if st == poll {
				pr, stopPoll = startPoll()
			}
			start := time.Now()
			var pw sync.WaitGroup
			for p := range producers {
				pw.Go(func() {
					for j := p; j < n; j += producers {
						tx, err := idemtest.D(st).Begin(ctx)
						if err == nil {
							_, err = ob.Add(ctx, tx, &outbox.Message{AggregateID: fmt.Sprintf("agg-%d-%d", seq, j%1000), Type: "t", Payload: []byte("x")})
							if err == nil {
								err = idemtest.D(st).Commit(ctx, tx)
							} else {
								_ = idemtest.D(st).Rollback(ctx, tx)
							}
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			pw.Wait()
			took[i] += time.Since(start)
			b.StopTimer()
			switch st {
			case poll:
				drained(pr, int64(n))
				stopPoll()
			case wake:
				wakeRows += int64(n)
				drained(r, wakeRows)
			case wake2:
				wake2Rows += int64(n)
				drained(r2, wake2Rows)
			}
			b.StartTimer()
		}
		seq++
	}
	b.StopTimer()
	rate := func(d time.Duration) float64 { return float64(b.N) / d.Seconds() }
	b.ReportMetric(rate(took[0]), "nowake-commits/s")
	b.ReportMetric(rate(took[1]), "poll-commits/s")
	b.ReportMetric(rate(took[2]), "wake-commits/s")
	b.ReportMetric(rate(took[3]), "notifyall-commits/s")
	b.ReportMetric(rate(took[4]), "nowake2-commits/s")
	b.ReportMetric(rate(took[5]), "wake2-commits/s")
	b.ReportMetric(100*took[5].Seconds()/took[2].Seconds(), "wake/wake2-%")
	b.ReportMetric(100*took[4].Seconds()/took[0].Seconds(), "nowake/nowake2-%")
	b.ReportMetric(100*took[0].Seconds()/took[2].Seconds(), "wake/nowake-%")
	b.ReportMetric(100*took[1].Seconds()/took[2].Seconds(), "wake/poll-%")
	b.ReportMetric(100*took[0].Seconds()/took[3].Seconds(), "notifyall/nowake-%")
	b.ReportMetric(float64(r.Stats().Published), "relay-published")
	b.ReportMetric(float64(n1.Load()), "wake-notifies")
	b.ReportMetric(float64(n2.Load()), "wake2-notifies")
	b.ReportMetric(float64(r.Stats().Claims), "wake-claims")
	b.ReportMetric(float64(r2.Stats().Claims), "wake2-claims")
}
