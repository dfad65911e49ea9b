// Package wotel holds what wary's packages share for OpenTelemetry: the
// instrumentation scope, attribute names (the OpenTelemetry messaging
// semantic conventions plus wary's own) and W3C trace-context propagation
// through message headers. It uses only the OpenTelemetry API.
package wotel

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
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

// Tracer is wary's tracer from one provider, with a cheap test of whether
// tracing is on at all, so that instrumentation costs nothing when it is
// not.
type Tracer struct {
	tracer trace.Tracer
	global bool // from the global provider
}

// NewTracer returns the wary tracer of tp, or of the global provider if tp
// is nil. A no-op provider (go.opentelemetry.io/otel/trace/noop) turns
// tracing off.
func NewTracer(tp trace.TracerProvider) Tracer {
	if tp == nil || tp == initialTP { // nil, or the global one as Defaults gives it
		return Tracer{tracer: otel.GetTracerProvider().Tracer(Scope), global: true}
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return Tracer{}
	}
	return Tracer{tracer: tp.Tracer(Scope)}
}

// On reports whether spans started in ctx may be recorded or carry a
// context: false for a no-op provider, and for the global provider while
// no SDK was installed and ctx holds no span context (a caller that traces
// with a provider of its own still has its context propagated).
func (t Tracer) On(ctx context.Context) bool {
	switch {
	case t.tracer == nil:
		return false
	case t.global && initialTP != nil && otel.GetTracerProvider() == initialTP:
		return trace.SpanContextFromContext(ctx).IsValid()
	}
	return true
}

// Off reports whether tracing is off for good (a no-op provider).
func (t Tracer) Off() bool { return t.tracer == nil }

// Start starts a span (see trace.Tracer); call it only when On.
func (t Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, opts...)
}

// initialTP is the global tracer provider as the otel package starts it (a
// no-op that delegates to the SDK once one is installed), or nil if an SDK
// was installed before this package was initialised.
var initialTP = func() trace.TracerProvider {
	tp := otel.GetTracerProvider()
	if fmt.Sprintf("%T", tp) != "*global.tracerProvider" {
		return nil
	}
	return tp
}()

// Meter returns the wary meter of mp, or of the global provider if mp is
// nil.
func Meter(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(Scope)
}

// Inject returns h (name and value pairs, as broker.Headers) with the span
// context of ctx written into it as traceparent (and tracestate). h itself
// is not modified: the result is a copy. If ctx holds no valid span
// context, h is returned as it is.
func Inject(ctx context.Context, h [][2]string) [][2]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	c := pairs{p: make([][2]string, len(h), len(h)+2)}
	copy(c.p, h)
	prop.Inject(ctx, &c)
	return c.p
}

// Extract returns the remote span context carried by h (the zero,
// invalid, value if there is none or it is malformed).
func Extract(h [][2]string) trace.SpanContext {
	if !HasContext(h) {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(prop.Extract(context.Background(), &pairs{p: h}))
}

// HasContext reports whether h carries a traceparent header.
func HasContext(h [][2]string) bool { return (&pairs{p: h}).Get(HeaderTraceparent) != "" }

// Parent returns ctx with the span context carried by h as its remote
// parent, unless ctx already has a valid span (then ctx is returned).
func Parent(ctx context.Context, h [][2]string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if sc := Extract(h); sc.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// pairs is a propagation.TextMapCarrier on name and value pairs.
type pairs struct{ p [][2]string }

func (c *pairs) Get(key string) string {
	for _, kv := range c.p {
		if kv[0] == key {
			return kv[1]
		}
	}
	return ""
}

func (c *pairs) Set(key, value string) {
	for i := range c.p {
		if c.p[i][0] == key {
			c.p[i][1] = value
			return
		}
	}
	c.p = append(c.p, [2]string{key, value})
}

func (c *pairs) Keys() []string {
	ks := make([]string, len(c.p))
	for i, kv := range c.p {
		ks[i] = kv[0]
	}
	return ks
}

// Defaults sets each of a broker.Telemetry's fields that is zero to its
// default: slog.Default(), the global OpenTelemetry providers, time.Now.
func Defaults(l **slog.Logger, tp *trace.TracerProvider, mp *metric.MeterProvider, now *func() time.Time) {
	if *l == nil {
		*l = slog.Default()
	}
	if *tp == nil {
		*tp = otel.GetTracerProvider()
	}
	if *mp == nil {
		*mp = otel.GetMeterProvider()
	}
	if *now == nil {
		*now = time.Now
	}
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

// EventAttrs are wary.aggregate.id and wary.aggregate.version.
func EventAttrs(aggregateID string, version int64) []attribute.KeyValue {
	a := []attribute.KeyValue{AggregateID.String(aggregateID)}
	if version != 0 {
		a = append(a, AggregateVersion.Int64(version))
	}
	return a
}
