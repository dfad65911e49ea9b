package broker

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is where a component sends its logs, spans and metrics, and
// the clock it reads: one struct, embedded in TopicOptions,
// SubscriptionOptions and package idem's options (idem.Options,
// outbox.Options, outbox.RelayOptions, keys.Options), so that one value
// configures them all, as pgx has one tracer field per config. It is
// embedded by value: a literal sets it whole (Telemetry: tel, or
// Telemetry: broker.Telemetry{Logger: l}), and its fields read through
// (opts.Logger). Its zero value means the defaults stated here, once; a
// component ignores what it does not use (the package doc of each says
// which spans and metrics it reports). Test failpoints are not options:
// package idem/failpoint sets them in a context.
type Telemetry struct {
	// Logger receives the component's events (retries, failures,
	// parking). Default: slog.Default().
	Logger *slog.Logger
	// TracerProvider receives spans and MeterProvider metrics. Default:
	// the global providers (otel.GetTracerProvider,
	// otel.GetMeterProvider), which do nothing until an application
	// installs an SDK.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Now is the clock that stamps and schedules (idem's claims, parking,
	// purges and retries; the outbox's rows; the keys' leases). Default:
	// time.Now. Topics and subscriptions do not read it: their time is
	// the broker's (drivers/memory takes a clock of its own).
	Now func() time.Time
}

// WithDefaults returns t with every field left zero set to its default:
// slog.Default(), the global OpenTelemetry providers, time.Now. Every
// component that takes a Telemetry (broker, idem, the outbox and its
// relay, keys, the drivers) reads it through this method, so the defaults
// stated here hold everywhere.
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
