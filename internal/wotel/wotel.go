// Package wotel holds what wary's packages share for OpenTelemetry: the
// instrumentation scope, attribute names (the OpenTelemetry messaging
// semantic conventions plus wary's own) and W3C trace-context propagation
// through message headers. It uses only the OpenTelemetry API.
package wotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope name of every tracer and meter wary
// creates.
const Scope = "github.com/wary-go/wary"

// Attribute names. The messaging.* names follow the OpenTelemetry messaging
// semantic conventions; wary.* are wary's own.
const (
	System           = attribute.Key("messaging.system")
	Destination      = attribute.Key("messaging.destination.name")
	Subscription     = attribute.Key("messaging.destination.subscription.name")
	MessageID        = attribute.Key("messaging.message.id")
	OperationType    = attribute.Key("messaging.operation.type")
	OperationName    = attribute.Key("messaging.operation.name")
	BatchCount       = attribute.Key("messaging.batch.message_count")
	ErrorType        = attribute.Key("error.type")
	InboxResult      = attribute.Key("wary.inbox.result")
	Consumer         = attribute.Key("wary.consumer")
	AggregateID      = attribute.Key("wary.aggregate.id")
	AggregateVersion = attribute.Key("wary.aggregate.version")
	Sequence         = attribute.Key("wary.sequence")
	Settlement       = attribute.Key("wary.settlement")
)

// Header names of the W3C trace context, as they travel in message headers.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// prop is always W3C trace context: it is wary's envelope format (whatever
// the global propagator is), so every driver carries the same two headers.
var prop = propagation.TraceContext{}

// Tracer returns the wary tracer of tp, or of the global provider if tp is
// nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(Scope)
}

// Meter returns the wary meter of mp, or of the global provider if mp is
// nil.
func Meter(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(Scope)
}

// Inject returns h with the span context of ctx written into it as
// traceparent (and tracestate). h itself is not modified: the result is a
// copy. If ctx holds no valid span context, h is returned as it is.
func Inject(ctx context.Context, h map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	out := make(map[string]string, len(h)+2)
	for k, v := range h {
		out[k] = v
	}
	prop.Inject(ctx, propagation.MapCarrier(out))
	return out
}

// Extract returns the remote span context carried by h (the zero,
// invalid, value if there is none or it is malformed).
func Extract(h map[string]string) trace.SpanContext {
	if h[HeaderTraceparent] == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.MapCarrier(h)))
}

// HasContext reports whether h carries a traceparent header.
func HasContext(h map[string]string) bool { return h[HeaderTraceparent] != "" }

// Parent returns ctx with the span context carried by h as its remote
// parent, unless ctx already has a valid span (then ctx is returned).
func Parent(ctx context.Context, h map[string]string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if sc := Extract(h); sc.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// Error records err on span (status Error, and error.type if errType is
// not empty) if err is not nil and span is recording.
func Error(span trace.Span, err error, errType string) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	if errType != "" {
		span.SetAttributes(ErrorType.String(errType))
	}
}
