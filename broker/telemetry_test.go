package broker

import (
	"log/slog"
	"testing"
)

// TestTelemetryDefaults: the zero fields get their defaults, the set ones
// are kept.
func TestTelemetryDefaults(t *testing.T) {
	d := Telemetry{}.withDefaults()
	if d.Logger != slog.Default() || d.TracerProvider == nil || d.MeterProvider == nil || d.Now == nil {
		t.Fatalf("defaults: %+v", d)
	}
	l := slog.New(slog.DiscardHandler)
	if got := (Telemetry{Logger: l}).withDefaults(); got.Logger != l {
		t.Errorf("a set Logger was replaced")
	}
}
