package telemetry_test

import (
	"context"
	"github.com/wary-go/wary/broker/driver"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wary-go/wary/internal/wotel"
)

// TestTracerOn: tracing is off with a no-op provider, and with the global
// provider until an SDK is installed, unless the caller's ctx carries a
// span context; Inject and Extract round-trip it without touching the
// caller's map.
func TestTracerOn(t *testing.T) {
	ctx := context.Background()
	sdk := sdktrace.NewTracerProvider()
	defer sdk.Shutdown(ctx)
	sctx, span := sdk.Tracer("t").Start(ctx, "caller")
	defer span.End()

	if tr := wotel.NewTracer(noop.NewTracerProvider()); !tr.Off() || tr.On(sctx) {
		t.Error("a no-op provider must turn tracing off")
	}
	global := wotel.NewTracer(nil)
	if global.On(ctx) {
		t.Error("global provider without an SDK: On must be false for a ctx without a span")
	}
	if !global.On(sctx) {
		t.Error("global provider without an SDK: On must be true for a ctx with a span (its context is propagated)")
	}
	if !wotel.NewTracer(sdk).On(ctx) {
		t.Error("an SDK provider given: On must be true")
	}
	otel.SetTracerProvider(sdk)
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	if !global.On(ctx) {
		t.Error("global provider after an SDK was installed: On must be true")
	}

	h := driver.Headers{{"a", "b"}}
	out := wotel.Inject(sctx, h)
	if len(h) != 1 || driver.Headers(out).Get(wotel.HeaderTraceparent) == "" {
		t.Fatalf("Inject: caller's map %v, result %v", h, out)
	}
	if got := wotel.Extract(out); !got.Equal(trace.SpanContextFromContext(sctx).WithRemote(true)) {
		t.Errorf("Extract = %v, want %v", got, trace.SpanContextFromContext(sctx))
	}
	if wotel.Extract(driver.Headers{{wotel.HeaderTraceparent, "garbage"}}).IsValid() {
		t.Error("a malformed traceparent must give no context")
	}
	if got := wotel.Inject(ctx, h); len(got) != 1 {
		t.Errorf("Inject without a span context added %v", got)
	}
}
