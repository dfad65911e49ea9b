package broker

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/wary-go/wary/internal/wotel"
)

// Telemetry is where a component sends its logs, spans and metrics, and
// the clock it reads: embedded by value in TopicOptions,
// SubscriptionOptions and package idem's options, so that one value
// configures them all. A zero field means its default: slog.Default(),
// the global OpenTelemetry providers (which do nothing until an
// application installs an SDK), time.Now. Test failpoints are not options
// (package idem/failpoint).
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

// withDefaults returns t with its zero fields set to the defaults.
func (t Telemetry) withDefaults() Telemetry {
	wotel.Defaults(&t.Logger, &t.TracerProvider, &t.MeterProvider, &t.Now)
	return t
}
