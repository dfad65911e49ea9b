package broker_test

import (
	"log/slog"
	"testing"

	"github.com/wary-go/wary/broker"
)

// TestTelemetryWithDefaults: the zero fields get their defaults, the set
// ones are kept.
func TestTelemetryWithDefaults(t *testing.T) {
	d := broker.Telemetry{}.WithDefaults()
	if d.Logger != slog.Default() || d.TracerProvider == nil || d.MeterProvider == nil || d.Now == nil {
		t.Fatalf("defaults: %+v", d)
	}
	l := slog.New(slog.DiscardHandler)
	if got := (broker.Telemetry{Logger: l}).WithDefaults(); got.Logger != l {
		t.Errorf("a set Logger was replaced")
	}
}
