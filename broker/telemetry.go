package broker

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is where a component sends its logs, spans and metrics, and
// the clock it reads: embedded by value in TopicOptions,
// SubscriptionOptions and package idem's options, so that one value
// configures them all. Its zero fields mean the defaults WithDefaults
// sets. Test failpoints are not options (package idem/failpoint).
type Telemetry struct {
	// Logger receives the component's events (retries, failures, parking).
	Logger *slog.Logger
	// TracerProvider receives spans and MeterProvider metrics.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Now is the clock that stamps and schedules (idem's claims, parking,
	// purges and retries; the outbox's rows; the keys' leases); topics and
	// subscriptions keep the broker's time.
	Now func() time.Time
}

// WithDefaults returns t with its zero fields set to the defaults:
// slog.Default(), the global OpenTelemetry providers (which do nothing
// until an application installs an SDK), time.Now. Every component that
// takes a Telemetry applies it.
func (t Telemetry) WithDefaults() Telemetry {
	if t.Logger == nil {
		t.Logger = slog.Default()
	}
	if t.TracerProvider == nil {
		t.TracerProvider = otel.GetTracerProvider()
	}
	if t.MeterProvider == nil {
		t.MeterProvider = otel.GetMeterProvider()
	}
	if t.Now == nil {
		t.Now = time.Now
	}
	return t
}
