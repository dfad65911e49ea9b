package telemetry_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	mnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
)

// pipeline is one event's whole path on SQLite and the memory broker, with
// one pair of providers: Outbox.Add in its own transaction, the relay's
// Drain, Receive, and Inbox.Handle (claim and commit, no other write).
type pipeline struct {
	name  string
	db    *sql.DB
	st    *sqlite.Store
	box   *outbox.Outbox[*sql.Tx]
	relay *outbox.Relay
	topic *broker.Topic
	sub   *broker.Subscription
	inbox *idem.Inbox[*sql.Tx]
	spent time.Duration
}

var quiet = slog.New(slog.DiscardHandler)

func newPipeline(b testing.TB, name string, tp trace.TracerProvider, mp metric.MeterProvider) *pipeline {
	ctx := context.Background()
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(b.TempDir(), "bench.db"))+"&_pragma=synchronous(NORMAL)")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	st, err := sqlite.New(ctx, db, nil)
	if err != nil {
		b.Fatal(err)
	}
	mb := memory.New(nil)
	b.Cleanup(func() { mb.Close() })
	if err := mb.CreateTopic("events", &memory.TopicConfig{Profile: memory.Queue}); err != nil {
		b.Fatal(err)
	}
	if err := mb.CreateSubscription("events", "consumer"); err != nil {
		b.Fatal(err)
	}
	tel := broker.Telemetry{TracerProvider: tp, MeterProvider: mp} // one value for every component
	topic, err := mb.OpenTopic("events", &memory.TopicOptions{TopicOptions: broker.TopicOptions{Telemetry: tel}})
	if err != nil {
		b.Fatal(err)
	}
	sub, err := mb.OpenSubscription("events", "consumer", &memory.SubscriptionOptions{SubscriptionOptions: broker.SubscriptionOptions{Telemetry: tel}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { topic.Close(); sub.Close() })
	p := &pipeline{name: name, db: db, st: st, topic: topic, sub: sub}
	if p.box, err = outbox.New[*sql.Tx](st, &outbox.Options{Telemetry: tel}); err != nil {
		b.Fatal(err)
	}
	tel.Logger = quiet
	if p.relay, err = outbox.NewRelay(st, topic, &outbox.RelayOptions{Telemetry: tel, PurgeInterval: -1}); err != nil {
		b.Fatal(err)
	}
	if p.inbox, err = idem.NewInbox[*sql.Tx](st, "consumer", sub.Capabilities(), &idem.Options{Telemetry: tel, PurgeInterval: -1}); err != nil {
		b.Fatal(err)
	}
	return p
}

// events sends n events, from first on, down the pipeline.
func (p *pipeline) events(b *testing.B, first, n int) {
	ctx := context.Background()
	start := time.Now()
	for i := first; i < first+n; i++ {
		tx, err := p.st.DB().BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.box.Add(ctx, tx, &outbox.Message{ID: fmt.Sprint("e", i), AggregateID: fmt.Sprint("a", i%10), Version: int64(i + 1)}); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if sent, err := p.relay.Drain(ctx); err != nil || sent != n {
		b.Fatalf("relay published %d of %d: %v", sent, n, err)
	}
	for left := n; left > 0; {
		ds, err := p.sub.Receive(ctx, left)
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range ds {
			if r, err := p.inbox.Handle(ctx, d, func(context.Context, *sql.Tx, *broker.Delivery) error { return nil }); r != idem.ResultApplied {
				b.Fatalf("handle: %v %v", r, err)
			}
		}
		left -= len(ds)
	}
	p.spent += time.Since(start)
}

// BenchmarkTelemetryPipeline measures what instrumentation costs per event
// on its whole path (outbox, relay, broker, inbox; SQLite and the memory
// broker): "none" (no provider given, no SDK installed), "noop" (no-op
// providers given) and "sdk" (every span sampled and batched to an
// exporter that drops it; metrics to a manual reader never collected), in
// alternating rounds of 50 events, each arm going first in turn.
func BenchmarkTelemetryPipeline(b *testing.B) {
	sdkTP := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	sdkMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = sdkTP.Shutdown(context.Background()); _ = sdkMP.Shutdown(context.Background()) }()
	ps := []*pipeline{
		newPipeline(b, "none", nil, nil),
		newPipeline(b, "noop", tnoop.NewTracerProvider(), mnoop.NewMeterProvider()),
		newPipeline(b, "sdk", sdkTP, sdkMP),
	}
	const round = 50
	b.ResetTimer()
	for done, turn := 0, 0; done < b.N; done, turn = done+round, turn+1 {
		for k := range ps {
			ps[(k+turn)%len(ps)].events(b, done, min(round, b.N-done))
		}
	}
	b.StopTimer()
	perEvent := func(p *pipeline) float64 { return float64(p.spent.Microseconds()) / float64(b.N) }
	for _, p := range ps {
		b.ReportMetric(perEvent(p), p.name+"-µs/event")
	}
	b.ReportMetric(100*(perEvent(ps[2])/perEvent(ps[0])-1), "sdk-overhead-%")
	b.ReportMetric(100*(perEvent(ps[1])/perEvent(ps[0])-1), "noop-overhead-%")
}
