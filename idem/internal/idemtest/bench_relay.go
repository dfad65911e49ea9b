package idemtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// BenchRelay measures rows per second published through the relay to b's
// topic: b.N rows over 100 aggregates are committed to the outbox first
// (not timed), then relays (Run) publish them until the backlog is empty.
// "relay" is one relay with the default options (batches of 500);
// "relay-batch1" claims one row at a time; "relay-batch500" claims 500 rows
// at a time; "3relays" runs three at once (on a store with a relay lease,
// they take turns).
func BenchRelay[Tx any](b *testing.B, f Factory[Tx], br func(t testing.TB) OutboxBroker) {
	b.Run("relay", func(b *testing.B) { benchRelay(b, f, br(b), 1, 0) })
	b.Run("relay-batch1", func(b *testing.B) { benchRelay(b, f, br(b), 1, 1) })
	b.Run("relay-batch500", func(b *testing.B) { benchRelay(b, f, br(b), 1, 500) })
	b.Run("3relays", func(b *testing.B) { benchRelay(b, f, br(b), 3, 0) })
}

func benchRelay[Tx any](b *testing.B, f Factory[Tx], br OutboxBroker, relays, batch int) {
	e := SetupOutbox(b, f)
	for start := 0; start < b.N; start += 500 {
		var msgs []*outbox.Message
		for i := start; i < min(start+500, b.N); i++ {
			msgs = append(msgs, OM(fmt.Sprintf("m%09d", i), fmt.Sprintf("agg-%03d", i%100), 0, "payload"))
		}
		e.Add(msgs...)
	}
	rs := make([]*outbox.Relay, relays)
	for i := range rs {
		rs[i] = e.Relay(br.Topic, &outbox.RelayOptions{Owner: fmt.Sprintf("bench-%d", i), BatchSize: batch})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				b.Error(err)
			}
		})
	}
	for {
		h, err := rs[0].Health(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if h.Backlog == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	if n := e.Int(`SELECT count(*) FROM wary_outbox WHERE state = 1`); n != int64(b.N) {
		b.Errorf("%d rows sent, want %d", n, b.N)
	}
}

// latencyProducers is how many goroutines share BenchRelayLatency's
// commits, so that the rate holds when one commit takes longer than the
// interval between two (a PostgreSQL commit with fsync takes 1-3ms).
const latencyProducers = 8

// LatencyRate is the rate, in rows per second, at which BenchRelayLatency
// commits outbox rows.
const LatencyRate = 1000

// LatencyOptions say what wakes BenchRelayLatency's relay.
type LatencyOptions struct {
	// Wake: the producer calls Relay.Wake after each commit (for stores
	// without NOTIFY). Otherwise the store's notification wakes the relay
	// (PostgreSQL's LISTEN), which listens before timing starts.
	Wake bool
	// CaughtUp, with Stream, reports whether the stream has reached the
	// log's end as it was when CaughtUp was first called; timing starts
	// once it has (a relay started has the log since its slot's restart
	// position to decode first, a one-off that a relay streaming all
	// along does not pay for each row).
	CaughtUp func() bool
	// Stream: the relay streams the store's log (a streaming source,
	// Source.Stream); timing starts once it does. What the stream keeps
	// on the server (PostgreSQL: a replication slot and a publication) is
	// left for the caller to drop.
	Stream bool
}

// BenchRelayLatency measures commit-to-publish latency under a steady
// load: producers commit b.N outbox rows (one per transaction, over 100
// aggregates) on a fixed schedule of LatencyRate rows per second, shared
// by eight goroutines,
// while one relay with the default options runs with a PollInterval of a
// minute, so that what wakes it is what o says: the store's NOTIFY, the
// producer's Relay.Wake after each commit, or the store's log. A consumer
// on b's subscription receives and acknowledges.
//
// For each row, the commit time is taken when Commit returned; it reports
// the p50, p99 and maximum of the time until the broker accepted the
// message (the relay's Publish returned: "p50-publish-ms",
// "p99-publish-ms", "max-publish-ms") and until the consumer received it
// ("p50-receive-ms", "p99-receive-ms", "max-receive-ms"). Run it with
// -benchtime=5000x for 5,000 rows (five seconds). WARY_BENCH_PIPELINE sets
// the source's Pipeline (Source.Pipeline).
func BenchRelayLatency[Tx any](b *testing.B, f Factory[Tx], br func(t testing.TB) OutboxBroker, o LatencyOptions) {
	e := SetupOutbox(b, f)
	ob := br(b)
	b.ResetTimer()
	l := RelayLatency(b, e, ob, b.N, "m", o)
	b.ReportMetric(Percentile(l.Publish, 0.50), "p50-publish-ms")
	b.ReportMetric(Percentile(l.Publish, 0.99), "p99-publish-ms")
	b.ReportMetric(Percentile(l.Publish, 1), "max-publish-ms")
	b.ReportMetric(Percentile(l.Receive, 0.50), "p50-receive-ms")
	b.ReportMetric(Percentile(l.Receive, 0.99), "p99-receive-ms")
	b.ReportMetric(Percentile(l.Receive, 1), "max-receive-ms")
	b.ReportMetric(float64(b.N)/l.Elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(l.Claims)/l.Elapsed.Seconds(), "claims/s")
}

// Latency is one RelayLatency run: each row's latency from its commit to
// its publish and to its receipt, in milliseconds, sorted.
type Latency struct {
	Publish, Receive []float64
	// Elapsed runs from the first commit's schedule until the consumer
	// had every row; Claims counts the relay's claims (with rows) in it.
	Elapsed time.Duration
	Claims  int64
	// Committed is each row's commit time, by message ID (for a caller
	// that times stages in between).
	Committed map[string]time.Time
}

// Percentile returns the p-quantile (0 to 1) of sorted (0 if empty).
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// RelayLatency is one run of BenchRelayLatency on e and ob: n rows, their
// message IDs ids followed by the row's number (unique in e's outbox for
// each run on it), committed by ProduceAtLatencyRate. Rows of earlier runs
// that the relay publishes again (it stopped after their publish, before
// marking them) are not counted. The timer runs only while the rows are
// produced and received; the relay stops before it returns, once it
// marked them (or after 10 seconds).
func RelayLatency[Tx any](b *testing.B, e *OutboxEnv[Tx], ob OutboxBroker, n int, ids string, o LatencyOptions) Latency {
	b.StopTimer()
	sub := ob.Subscribe(b)
	var (
		mu        sync.Mutex
		committed = make(map[string]time.Time, n)
		published = make(map[string]time.Time, n)
		received  = make(map[string]time.Time, n)
		all       = make(chan struct{})
	)
	pipeline, _ := strconv.Atoi(os.Getenv("WARY_BENCH_PIPELINE")) // 0: the default
	ro := &outbox.RelayOptions{Owner: "latency", PollInterval: time.Minute}
	r := e.Relay(ob.Topic, ro)
	if pipeline > 0 || o.Stream {
		r = e.SourceRelay(ob.Topic, Source{Pipeline: pipeline, Stream: o.Stream}, ro)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	sent := failpoint.WithAfterPublish(ctx, func(m *broker.Message) error {
		now := time.Now()
		mu.Lock()
		if _, ok := published[m.ID]; !ok && strings.HasPrefix(m.ID, ids) {
			published[m.ID] = now
		}
		mu.Unlock()
		return nil
	})
	wg.Go(func() {
		if err := r.Run(sent); err != nil {
			b.Error(err)
		}
	})
	wg.Go(func() {
		for {
			ds, err := sub.Receive(ctx, 10)
			now := time.Now()
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					b.Error(err)
				}
				return
			}
			mu.Lock()
			for _, d := range ds {
				if _, ok := received[d.Message.ID]; !ok && strings.HasPrefix(d.Message.ID, ids) {
					received[d.Message.ID] = now
				}
			}
			done := len(received) == n
			mu.Unlock()
			for _, d := range ds {
				if err := d.Ack(ctx); err != nil && ctx.Err() == nil {
					b.Error(err)
				}
			}
			if done {
				close(all)
				return
			}
		}
	})
	switch {
	case o.Stream:
		waitRelay(b, r, "stream (the store cannot stream)", func(s outbox.RelayStats) bool { return s.Streaming })
		if o.CaughtUp != nil {
			waitRelay(b, r, "reach the log's end with its stream", func(outbox.RelayStats) bool { return o.CaughtUp() })
		}
	case !o.Wake:
		waitRelay(b, r, "listen (the store does not wake relays, or it failed to listen)", func(s outbox.RelayStats) bool { return s.Listening })
	}
	stats := r.Stats()
	b.StartTimer()
	start := time.Now()
	err := ProduceAtLatencyRate(ctx, e, start, n, ids, func(id string) {
		now := time.Now()
		mu.Lock()
		committed[id] = now
		mu.Unlock()
		if o.Wake {
			r.Wake()
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		mu.Lock()
		got := len(received)
		mu.Unlock()
		b.Fatalf("after a minute, %d of %d rows received", got, n)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	// The consumer may receive a message before its confirm reaches the
	// relay: wait for the last AfterPublish calls, and for the relay to
	// mark the rows (so that the next run on e does not publish them
	// again).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		mu.Lock()
		got := len(published)
		mu.Unlock()
		if got == n && r.Stats().Published-stats.Published >= int64(n) {
			break
		}
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	lat := func(at map[string]time.Time) []float64 {
		var out []float64
		for id, c := range committed {
			if t, ok := at[id]; ok {
				out = append(out, float64(t.Sub(c))/float64(time.Millisecond))
			}
		}
		slices.Sort(out)
		return out
	}
	l := Latency{Publish: lat(published), Receive: lat(received), Elapsed: elapsed, Claims: r.Stats().Claims - stats.Claims,
		Committed: maps.Clone(committed)}
	if len(l.Publish) != n || len(l.Receive) != n {
		b.Errorf("%d published and %d received of %d", len(l.Publish), len(l.Receive), n)
	}
	return l
}

// waitRelay waits up to a minute for ready(r.Stats()), failing b with
// "the relay does not "+what if it does not come.
func waitRelay(b *testing.B, r *outbox.Relay, what string, ready func(outbox.RelayStats) bool) {
	for deadline := time.Now().Add(time.Minute); !ready(r.Stats()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the relay does not %s; last error: %q", what, r.Stats().LastError)
		}
	}
}

// ProduceAtLatencyRate commits n outbox rows, one per transaction, on 100
// aggregates, from latencyProducers goroutines: row i (message ID ids
// followed by i as "%09d") at start + i/LatencyRate. After each commit it
// calls committed, if set, with the row's message ID. It returns when
// every row is committed, or with the first error.
func ProduceAtLatencyRate[Tx any](ctx context.Context, e *OutboxEnv[Tx], start time.Time, n int, ids string, committed func(id string)) error {
	interval := time.Second / LatencyRate
	errs := make(chan error, latencyProducers)
	var producers sync.WaitGroup
	for p := range latencyProducers {
		producers.Go(func() {
			for i := p; i < n; i += latencyProducers {
				if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
					time.Sleep(d)
				}
				id := fmt.Sprintf("%s%09d", ids, i)
				if err := addOne(ctx, e, OM(id, fmt.Sprintf("agg-%03d", i%100), 0, "payload")); err != nil {
					errs <- err
					return
				}
				if committed != nil {
					committed(id)
				}
			}
		})
	}
	producers.Wait()
	close(errs)
	return <-errs
}

// addOne commits m in a transaction of its own.
func addOne[Tx any](ctx context.Context, e *OutboxEnv[Tx], m *outbox.Message) error {
	tx, err := e.Driver.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := e.Outbox.Add(ctx, tx, m); err != nil {
		rctx, cancel := seam.Detach(ctx)
		defer cancel()
		_ = e.Driver.Rollback(rctx, tx)
		return err
	}
	return e.Driver.Commit(ctx, tx)
}

// BenchRelayBacklog measures the claim's dependence on the backlog: two
// outboxes hold small and large pending rows over 100 aggregates
// (committed first, not timed), and a relay on each claims and publishes
// one row at a time (BatchSize 1, RunOnce), in interleaved rounds of 100
// rows. It reports both rates and large/small-%: a claim whose cost
// does not grow with the backlog keeps it near 100.
func BenchRelayBacklog[Tx any](b *testing.B, f Factory[Tx], br func(t testing.TB) OutboxBroker, small, large int) {
	fill := func(n int) *outbox.Relay {
		e := SetupOutbox(b, f)
		for start := 0; start < n; start += 500 {
			var msgs []*outbox.Message
			for i := start; i < min(start+500, n); i++ {
				msgs = append(msgs, OM(fmt.Sprintf("m%09d", i), fmt.Sprintf("agg-%03d", i%100), 0, "payload"))
			}
			e.Add(msgs...)
		}
		return e.Relay(br(b).Topic, &outbox.RelayOptions{Owner: fmt.Sprintf("backlog-%d", n), BatchSize: 1})
	}
	rs := []*outbox.Relay{fill(small), fill(large)}
	ctx := context.Background()
	var took [2]time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += 100 {
		for i, r := range rs {
			start := time.Now()
			for range min(100, b.N-done) {
				if n, err := r.RunOnce(ctx); n != 1 || err != nil {
					b.Fatalf("RunOnce: %d, %v", n, err)
				}
			}
			took[i] += time.Since(start)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took[0].Seconds(), "small-rows/s")
	b.ReportMetric(float64(b.N)/took[1].Seconds(), "large-rows/s")
	b.ReportMetric(100*took[0].Seconds()/took[1].Seconds(), "large/small-%")
}
