package sqlite_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
)

// instruments records every instrument created through its meters, by
// name: the Prometheus name the OpenTelemetry exporter gives it.
type instruments struct {
	mu    sync.Mutex
	names map[string]string
}

func (r *instruments) add(name, unit string, counter bool) {
	prom := strings.ReplaceAll(name, ".", "_")
	if unit == "s" {
		prom += "_seconds"
	}
	if counter {
		prom += "_total"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[name] = prom
}

type recordingProvider struct {
	noop.MeterProvider
	r *instruments
}

func (p recordingProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return recordingMeter{r: p.r}
}

type recordingMeter struct {
	noop.Meter
	r *instruments
}

func (m recordingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	m.r.add(name, metric.NewInt64CounterConfig(opts...).Unit(), true)
	return m.Meter.Int64Counter(name, opts...)
}

func (m recordingMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	m.r.add(name, metric.NewFloat64HistogramConfig(opts...).Unit(), false)
	return m.Meter.Float64Histogram(name, opts...)
}

func (m recordingMeter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	m.r.add(name, metric.NewInt64ObservableGaugeConfig(opts...).Unit(), false)
	return m.Meter.Int64ObservableGauge(name, opts...)
}

func (m recordingMeter) Float64ObservableGauge(name string, opts ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	m.r.add(name, metric.NewFloat64ObservableGaugeConfig(opts...).Unit(), false)
	return m.Meter.Float64ObservableGauge(name, opts...)
}

func (m recordingMeter) Int64ObservableCounter(name string, opts ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	m.r.add(name, metric.NewInt64ObservableCounterConfig(opts...).Unit(), true)
	return m.Meter.Int64ObservableCounter(name, opts...)
}

// TestDocMetrics: docs/operating.md's metrics table lists every instrument
// a topic, a subscription, an inbox and a running relay create, each with
// the name Prometheus gives it, and its alert rules use only those names.
func TestDocMetrics(t *testing.T) {
	ctx := t.Context()
	st, _, _, cleanup := setup(ctx)
	defer cleanup()
	rec := &instruments{names: map[string]string{}}
	mp := recordingProvider{r: rec}

	b := memory.New(nil)
	defer b.Close()
	if err := errors.Join(b.CreateTopic("metrics", nil), b.CreateSubscription("metrics", "billing")); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("metrics", &memory.TopicOptions{TopicOptions: broker.TopicOptions{Telemetry: broker.Telemetry{MeterProvider: mp}}})
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	sub, err := b.OpenSubscription("metrics", "billing", &memory.SubscriptionOptions{SubscriptionOptions: broker.SubscriptionOptions{Telemetry: broker.Telemetry{MeterProvider: mp}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := idem.NewInbox(st, "billing", sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{MeterProvider: mp}}); err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(st, topic, &outbox.RelayOptions{Telemetry: broker.Telemetry{MeterProvider: mp, Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	cancel() // Run registers the outbox gauges, then returns
	if err := relay.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	doc, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, metrics, _ := strings.Cut(string(doc), "\n## Metrics\n")
	metrics, _, _ = strings.Cut(metrics, "\n## ")
	listed := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| `([a-z._]+)` \\| `([a-z_]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(metrics, -1) {
		listed[m[1]] = m[2]
	}
	if len(rec.names) < 11 {
		t.Fatalf("recorded %d instruments, want at least the 11 of topic, subscription, inbox and relay: %v", len(rec.names), rec.names)
	}
	for name, prom := range rec.names {
		if got, ok := listed[name]; !ok || got != prom {
			t.Errorf("docs/operating.md, Metrics: %s is listed as %q, want %q", name, got, prom)
		}
	}
	for name := range listed {
		if _, ok := rec.names[name]; !ok {
			t.Errorf("docs/operating.md, Metrics: %s is listed but no instrument has that name", name)
		}
	}

	_, rules, ok := strings.Cut(string(doc), "\n## Alert rules\n")
	if !ok {
		t.Fatal("docs/operating.md lacks ## Alert rules")
	}
	known := map[string]bool{}
	for _, prom := range rec.names {
		known[prom] = true
	}
	used := regexp.MustCompile(`\b(?:wary|messaging)_[a-z_]+`).FindAllString(rules, -1)
	if len(used) == 0 {
		t.Fatal("the alert rules use no wary metric")
	}
	for _, u := range used {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(u, "_bucket"), "_sum"), "_count")
		if !known[u] && !known[base] && !strings.HasPrefix(u, "wary_consumer") && !strings.HasPrefix(u, "wary_settlement") && !strings.HasPrefix(u, "messaging_destination") {
			t.Errorf("docs/operating.md, Alert rules: %s is no metric wary reports (known: %v)", u, sortedKeys(known))
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
