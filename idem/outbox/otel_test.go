package outbox

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// While Run runs, the outbox gauges read the store's backlog at each
// collection, and, for a streaming source on a store that reports its
// stream, the stream's lag; when Run returns, they report nothing.
func TestRunObservesTheOutbox(t *testing.T) {
	for _, kind := range []string{"poll", "stream"} {
		t.Run(kind, func(t *testing.T) {
			g := newRig(t)
			created := g.clock.Now()
			g.s.put(Row{Message: *msg("a", 1), State: Quarantined, CreatedAt: created}, Row{Message: *msg("a", 2), CreatedAt: created})
			g.clock.Advance(time.Minute)
			g.s.set(func(s *fakeStore) {
				s.state.Kind = kind
				s.stream = &StreamStatus{Exists: true, LagBytes: 4096, LagAge: 3 * time.Second, Released: 2}
			})
			m := &gaugeMeter{}
			r := g.relay(&RelayOptions{PurgeInterval: -1, Telemetry: broker.Telemetry{MeterProvider: gaugeProvider{m: m}}})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			g.s.waitFor("Run to wait", func() bool { return len(g.s.srcs) == 1 && g.s.srcs[0].idle > 0 })

			got := m.collect(t)
			want := map[string]float64{metricOutboxBacklog: 1, metricOutboxQuarantine: 1, metricOutboxOldest: 60}
			if kind == "stream" {
				want[metricStreamLag], want[metricStreamLagAge], want[metricStreamReleased] = 4096, 3, 2
			}
			if len(got) != len(want) {
				t.Errorf("observed %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := m.collect(t); len(got) != 0 {
				t.Errorf("after Run returned: %v, want nothing", got)
			}
		})
	}
}

// gaugeProvider hands out a gaugeMeter.
type gaugeProvider struct {
	noop.MeterProvider
	m *gaugeMeter
}

func (p gaugeProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

// gaugeMeter keeps the callbacks registered with it, and names its
// observable instruments, so that a test can collect them.
type gaugeMeter struct {
	noop.Meter
	mu  sync.Mutex
	cbs map[int]metric.Callback
	n   int
}

type named interface{ instName() string }

type int64Gauge struct {
	noop.Int64ObservableGauge
	name string
}

type float64Gauge struct {
	noop.Float64ObservableGauge
	name string
}

type int64Counter struct {
	noop.Int64ObservableCounter
	name string
}

func (i int64Gauge) instName() string   { return i.name }
func (i float64Gauge) instName() string { return i.name }
func (i int64Counter) instName() string { return i.name }

func (m *gaugeMeter) Int64ObservableGauge(name string, _ ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	return int64Gauge{name: name}, nil
}

func (m *gaugeMeter) Float64ObservableGauge(name string, _ ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	return float64Gauge{name: name}, nil
}

func (m *gaugeMeter) Int64ObservableCounter(name string, _ ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	return int64Counter{name: name}, nil
}

func (m *gaugeMeter) RegisterCallback(f metric.Callback, _ ...metric.Observable) (metric.Registration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cbs == nil {
		m.cbs = map[int]metric.Callback{}
	}
	m.n++
	m.cbs[m.n] = f
	return registration{m: m, id: m.n}, nil
}

type registration struct {
	noop.Registration
	m  *gaugeMeter
	id int
}

func (r registration) Unregister() error {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	delete(r.m.cbs, r.id)
	return nil
}

// collect runs the registered callbacks and returns what they observed.
func (m *gaugeMeter) collect(t *testing.T) map[string]float64 {
	m.mu.Lock()
	var cbs []metric.Callback
	for _, f := range m.cbs {
		cbs = append(cbs, f)
	}
	m.mu.Unlock()
	o := &observer{got: map[string]float64{}}
	for _, f := range cbs {
		if err := f(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	return o.got
}

type observer struct {
	noop.Observer
	got map[string]float64
}

func (o *observer) ObserveFloat64(i metric.Float64Observable, v float64, _ ...metric.ObserveOption) {
	o.got[i.(named).instName()] = v
}

func (o *observer) ObserveInt64(i metric.Int64Observable, v int64, _ ...metric.ObserveOption) {
	o.got[i.(named).instName()] = float64(v)
}

// The producer's trace context travels with its event: Add stores the
// context of the caller's span with the row (a copy of the caller's
// headers), and the relay publishes it in the message's headers, so that
// the consumer's span joins the producer's trace. No SDK is installed:
// the spans carry the caller's context without recording.
func TestTraceContextTravelsWithTheRow(t *testing.T) {
	g := newRig(t)
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, Remote: true}))
	box, err := New(g.s, nil)
	if err != nil {
		t.Fatal(err)
	}
	headers := broker.Headers{{"tenant", "t1"}}
	tx := g.s.begin()
	if _, err := box.Add(ctx, tx, &Message{ID: "m", AggregateID: "a", Headers: headers}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if len(headers) != 1 {
		t.Errorf("Add changed the caller's headers: %v", headers)
	}
	row := g.s.all()[0]
	if tp := row.Headers.Get("traceparent"); !strings.Contains(tp, traceID.String()) || row.Headers.Get("tenant") != "t1" {
		t.Fatalf("row headers %v, want the caller's trace context beside its own", row.Headers)
	}
	if _, err := g.relay(nil).Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m := g.receive(1)[0]; !strings.Contains(m.Headers.Get("traceparent"), traceID.String()) {
		t.Errorf("published headers %v, want the producer's trace", m.Headers)
	}

	// Without a span in the caller's context, nothing is added.
	tx = g.s.begin()
	if _, err := box.Add(context.Background(), tx, &Message{ID: "n", AggregateID: "a"}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if h := g.s.all()[1].Headers; len(h) != 0 {
		t.Errorf("row headers %v, want none", h)
	}
}
