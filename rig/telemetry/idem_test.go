package telemetry_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
)

// TestRelayOutboxGauges: while Run runs, the outbox's backlog and oldest
// unsent age are reported from the store; after Run returns they are not.
func TestRelayOutboxGauges(t *testing.T) {
	ctx := t.Context()
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(t.TempDir(), "test.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := sqlite.New(ctx, db, &sqlite.Options{Source: sqlite.SourceOptions{PerAggregate: 1}})
	if err != nil {
		t.Fatal(err)
	}
	b := memory.New(nil)
	defer b.Close()
	if err := b.CreateTopic("events", &memory.TopicConfig{Profile: memory.Queue}); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()

	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	box, err := outbox.New[*sql.Tx](st, &outbox.Options{Telemetry: broker.Telemetry{Now: func() time.Time { return now.Add(-time.Minute) }}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := box.Add(ctx, tx, &outbox.Message{ID: id, AggregateID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	gauges := func() map[string]float64 { return collect(t, reader) }
	published := make(chan struct{})
	release := make(chan struct{})
	stop := errors.New("stop")
	relay, err := outbox.NewRelay(st, topic, &outbox.RelayOptions{Telemetry: broker.Telemetry{MeterProvider: mp, Now: clock}, Concurrency: 1, BatchSize: 1,
		PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if g := gauges(); len(g) != 0 {
		t.Errorf("gauges %v before Run, want none", g)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- relay.Run(failpoint.WithAfterPublish(rctx, func(*broker.Message) error {
			select {
			case published <- struct{}{}:
				<-release // hold the first row published and unmarked
				return stop
			default:
				return nil
			}
		}))
	}()
	<-published
	g := gauges()
	if g["wary.outbox.backlog"] != 3 || g["wary.outbox.oldest_unsent.age"] != 60 || g["wary.outbox.quarantined"] != 0 {
		t.Errorf("gauges while running: %v, want backlog 3, oldest age 60s, none quarantined", g)
	}
	close(release)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for name := range gauges() {
		if strings.HasPrefix(name, "wary.outbox.") {
			t.Errorf("%s reported after Run returned", name)
		}
	}
}

// telemetry is an SDK tracer provider with a span recorder and an SDK
// meter provider with a manual reader.
func telemetry(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder, *sdkmetric.MeterProvider, func() map[string]float64) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	counters := func() map[string]float64 { return collect(t, reader) }
	return tp, rec, mp, counters
}

// TestTraceThroughRun: an event added under a caller's span, published by
// the relay and consumed by Subscription.Run through Inbox.Wrap forms one
// trace: caller → create → publish → send, and create → process → inbox →
// claim, handler, commit. A second copy shows as
// wary.inbox.result=duplicate, without a handler span; the counters agree.
func TestTraceThroughRun(t *testing.T) {
	tp, rec, mp, counters := telemetry(t)
	p := newPipeline(t, "sdk", tp, mp)
	ctx := t.Context()
	cctx, caller := tp.Tracer("test").Start(ctx, "caller")
	tx, err := p.st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.box.Add(cctx, tx, &outbox.Message{ID: "e1", AggregateID: "a", Version: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	caller.End()
	if n, err := p.relay.Drain(ctx); err != nil || n != 1 {
		t.Fatalf("drain: %d, %v", n, err)
	}
	// A copy, as a relay that crashed before marking the row would send
	// (with the row's creation context; its send span is a root).
	var id, key, headers string
	if err := p.st.DB().QueryRowContext(ctx, `SELECT message_id, aggregate_id, headers FROM wary_outbox`).Scan(&id, &key, &headers); err != nil {
		t.Fatalf("outbox row: %v", err)
	}
	var hs broker.Headers
	if err := json.Unmarshal([]byte(headers), &hs); err != nil {
		t.Fatalf("outbox row's headers %q: %v", headers, err)
	}
	if err := p.topic.Publish(ctx, &broker.Message{ID: id, Key: key, Headers: hs}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var results []idem.Result
	h := func(context.Context, *sql.Tx, *broker.Delivery) error { return nil }
	err = p.sub.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
		r, err := p.inbox.Handle(ctx, d, h)
		if results = append(results, r); len(results) == 2 {
			cancel()
		}
		return err
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0] != idem.ResultApplied || results[1] != idem.ResultDuplicate {
		t.Fatalf("results %v, want applied then duplicate", results)
	}

	spans := rec.Ended()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
		byID[s.SpanContext().SpanID()] = s
		if s.SpanContext().TraceID() != caller.SpanContext().TraceID() && (s.Name() != "send events" || s.Parent().IsValid()) {
			t.Errorf("span %q is in another trace", s.Name())
		}
	}
	parent := func(s sdktrace.ReadOnlySpan) string {
		if p, ok := byID[s.Parent().SpanID()]; ok {
			return p.Name()
		}
		return "?"
	}
	want := map[string]struct {
		n      int
		parent string
	}{
		"create": {1, "caller"}, "publish": {1, "create"}, "send events": {2, "?"}, "process events/consumer": {2, "create"},
		"inbox consumer": {2, "process events/consumer"}, "inbox claim": {2, "inbox consumer"}, "handler": {1, "inbox consumer"},
		"inbox commit": {2, "inbox consumer"},
	}
	for name, w := range want {
		got := byName[name]
		if len(got) != w.n {
			t.Errorf("%d %q spans, want %d", len(got), name, w.n)
			continue
		}
		for _, s := range got {
			if name == "send events" {
				continue // the relay's is under publish, the copy's is a root
			}
			if parent(s) != w.parent {
				t.Errorf("%q span's parent is %q, want %q", name, parent(s), w.parent)
			}
		}
	}
	for _, s := range byName["inbox consumer"] {
		r := attrValue(s.Attributes(), "wary.inbox.result").AsString()
		for _, c := range byName["handler"] {
			if c.Parent().SpanID() == s.SpanContext().SpanID() && r != "applied" {
				t.Errorf("inbox span with result %q has a handler span", r)
			}
		}
	}
	if got := counters(); got["wary.inbox.results{applied}"] != 1 || got["wary.inbox.results{duplicate}"] != 1 ||
		got["messaging.client.consumed.messages"] != 2 || got["messaging.client.sent.messages"] != 2 ||
		got["wary.messages.settled{ack}"] != 2 || got["wary.relay.publish.duration"] != 1 || got["wary.relay.commit_to_publish.duration"] != 1 {
		t.Errorf("metrics %v", got)
	}
}

// TestAckAfterCommitMetric: a commit whose ack fails counts in
// wary.inbox.ack_after_commit.
func TestAckAfterCommitMetric(t *testing.T) {
	_, _, mp, counters := telemetry(t)
	p := newPipeline(t, "metrics", nil, mp)
	ctx := t.Context()
	tx, err := p.st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.box.Add(ctx, tx, &outbox.Message{ID: "e1", AggregateID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.relay.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	ds, err := p.sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.sub.Close() // the ack after the commit fails
	r, err := p.inbox.Handle(ctx, ds[0], func(context.Context, *sql.Tx, *broker.Delivery) error { return nil })
	if r != idem.ResultApplied || !errors.Is(err, idem.ErrAckAfterCommit) {
		t.Fatalf("Handle: %v, %v; want applied and ErrAckAfterCommit", r, err)
	}
	if got := counters(); got["wary.inbox.ack_after_commit"] != 1 || got["wary.inbox.results{applied}"] != 1 {
		t.Errorf("metrics %v, want one ack after commit, one applied", got)
	}
}

// collect reads reader's metrics: int64 sums and gauges and float64 gauges
// by name (and the wary.inbox.result or wary.settlement attribute, as
// NAME{VALUE}), histograms as their count of points.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	add := func(name string, attrs attribute.Set, v float64) {
		for _, a := range []attribute.Key{"wary.inbox.result", "wary.settlement"} {
			if av, ok := attrs.Value(a); ok {
				name += "{" + av.AsString() + "}"
			}
		}
		out[name] += v
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Value))
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Count))
				}
			}
		}
	}
	return out
}
