package broker

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/internal/wotel"
)

// tel is the OpenTelemetry instrumentation of one Topic or Subscription:
// its tracer, the attributes naming its destination, and its counters,
// whose attribute sets are built once so that counting allocates nothing.
type tel struct {
	tracer wotel.Tracer
	dest   string
	attrs  []attribute.KeyValue // messaging.system, messaging.destination.name

	count    metric.Int64Counter // sent (topic) or consumed (subscription) messages
	countOpt []metric.AddOption
	settled  metric.Int64Counter
	settle   [len(settleOps)][]metric.AddOption
}

// Metric names.
const (
	metricSent     = "messaging.client.sent.messages"
	metricConsumed = "messaging.client.consumed.messages"
	metricSettled  = "wary.messages.settled"
)

var settleNames = [...]string{settleAck: "ack", settleNack: "nack", settleDeadLetter: "dead_letter"}

func newTel(d any, tp trace.TracerProvider, mp metric.MeterProvider, topic bool) *tel {
	system, dest := "wary", ""
	if ds, ok := d.(driver.Describer); ok {
		system, dest = ds.Describe()
	}
	t := &tel{tracer: wotel.NewTracer(tp), dest: dest, attrs: []attribute.KeyValue{wotel.System.String(system), wotel.Destination.String(dest)}}
	m := wotel.Meter(mp)
	set := attribute.NewSet(t.attrs...)
	t.countOpt = []metric.AddOption{metric.WithAttributeSet(set)}
	if topic {
		// Errors here come from a misbehaving provider; the instruments
		// are then no-ops, which is all a library can do.
		t.count, _ = m.Int64Counter(metricSent, metric.WithUnit("{message}"),
			metric.WithDescription("Messages the broker accepted (Publish returned nil for their batch)."))
		return t
	}
	t.count, _ = m.Int64Counter(metricConsumed, metric.WithUnit("{message}"),
		metric.WithDescription("Messages delivered to the application by Receive (redeliveries included)."))
	t.settled, _ = m.Int64Counter(metricSettled, metric.WithUnit("{message}"),
		metric.WithDescription("Deliveries settled, by settlement (ack, nack, dead_letter)."))
	for k, name := range settleNames {
		t.settle[k] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), t.attrs...), wotel.Settlement.String(name))...))}
	}
	return t
}

// counted adds n to the sent or consumed counter.
func (t *tel) counted(ctx context.Context, n int) {
	if n > 0 {
		t.count.Add(ctx, int64(n), t.countOpt...)
	}
}

// settledOne counts one settlement of kind.
func (t *tel) settledOne(ctx context.Context, kind settleKind) {
	t.settled.Add(ctx, 1, t.settle[kind]...)
}

// settledN counts n settles of one kind (none for n 0).
func (t *tel) settledN(ctx context.Context, kind settleKind, n int) {
	if n > 0 {
		t.settled.Add(ctx, int64(n), t.settle[kind]...)
	}
}

// startSend starts the producer span of a Publish call and writes its
// context, as W3C traceparent, into the headers of the driver messages
// that carry none (a message from the outbox carries its creation
// context, which the span links to instead). The users' headers are
// not modified.
func (t *tel) startSend(ctx context.Context, dms []*driver.Message) (context.Context, trace.Span) {
	if !t.tracer.On(ctx) {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, "send "+t.dest, trace.WithSpanKind(trace.SpanKindProducer))
	if !span.SpanContext().IsValid() {
		return ctx, span
	}
	rec := span.IsRecording()
	if rec {
		span.SetAttributes(t.attrs...)
		span.SetAttributes(wotel.OperationType.String("send"), wotel.OperationName.String("send"))
		if len(dms) == 1 {
			span.SetAttributes(wotel.MessageID.String(dms[0].ID))
		} else {
			span.SetAttributes(wotel.BatchCount.Int(len(dms)))
		}
	}
	for _, m := range dms {
		if !wotel.HasContext(m.Headers) {
			m.Headers = wotel.Inject(ctx, m.Headers)
			continue
		}
		if sc := wotel.Extract(m.Headers); rec && sc.IsValid() && !sc.Equal(span.SpanContext()) {
			span.AddLink(trace.Link{SpanContext: sc})
		}
	}
	return ctx, span
}

// endSpan records err, if any, on span and ends it. A nil span (tracing
// off) is left alone.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		wotel.Error(span, err, errorType(err))
	}
	span.End()
}

// errorType names err's class for the error.type attribute.
func errorType(err error) string {
	if e, ok := err.(*Error); ok {
		return e.code.String()
	}
	return "_OTHER"
}

// startProcess starts the consumer span of one delivery handled by Run: a
// child of the message's creation context (from its traceparent header),
// which it also links to, as the messaging conventions describe for
// single-message processing.
func (t *tel) startProcess(ctx context.Context, d *Delivery) (context.Context, trace.Span) {
	if t.tracer.Off() {
		return ctx, nil
	}
	sc := wotel.Extract(d.Message.Headers)
	if sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	if !t.tracer.On(ctx) {
		return ctx, nil // the handler still sees the message's context
	}
	var opts [3]trace.SpanStartOption
	o := opts[:0]
	o = append(o, trace.WithSpanKind(trace.SpanKindConsumer))
	if sc.IsValid() {
		o = append(o, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := t.tracer.Start(ctx, "process "+t.dest, o...)
	if span.IsRecording() {
		span.SetAttributes(t.attrs...)
		span.SetAttributes(wotel.OperationType.String("process"), wotel.OperationName.String("process"),
			wotel.MessageID.String(d.Message.ID), attribute.Int("messaging.delivery.attempt", d.Attempt))
		setEventAttrs(span, d.Message.Headers)
	}
	return ctx, span
}

// setEventAttrs sets wary.aggregate.id and wary.aggregate.version from the
// event-identity headers, where present.
func setEventAttrs(span trace.Span, h Headers) {
	if id := h.Get(HeaderAggregateID); id != "" {
		span.SetAttributes(wotel.AggregateID.String(id))
	}
	if v, err := strconv.ParseInt(h.Get(HeaderAggregateVersion), 10, 64); err == nil {
		span.SetAttributes(wotel.AggregateVersion.Int64(v))
	}
}
