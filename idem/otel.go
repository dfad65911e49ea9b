package idem

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/internal/wotel"
)

// Telemetry of the outbox, the relay and the inbox. Spans:
//
//   - Outbox.Add starts one "create" span (kind producer) per message, a
//     child of the caller's span, and stores its context with the row as
//     the W3C headers traceparent and tracestate (a row whose headers carry
//     a traceparent already keeps it, and its span becomes the parent);
//   - the relay's "publish" span is a child of that stored context, around
//     Topic.Publish, whose "send" span (package broker) is its child; the
//     message carries the creation context through the broker;
//   - Inbox.Handle's "inbox CONSUMER" span is a child of the span in its ctx (the
//     "process" span of Subscription.Run), or else of the message's
//     creation context; its children are "inbox claim", "handler" and
//     "inbox commit". It carries wary.inbox.result.
//
// Metrics are listed with the options that take the providers.

// childSpan starts a child span of ctx's span with its tracer provider, or
// returns ctx and its span (allocating nothing) when that span is not
// recording; endChild leaves such a span alone.
func childSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(wotel.Scope).Start(ctx, name)
}

// endChild records err on span and ends it, if it records.
func endChild(span trace.Span, err error) {
	if span.IsRecording() {
		wotel.Error(span, err, "")
		span.End()
	}
}

// inboxTel is an inbox's instrumentation.
type inboxTel struct {
	tracer   wotel.Tracer
	name     string // "inbox CONSUMER"
	consumer attribute.KeyValue

	results   metric.Int64Counter
	resultOpt map[Result][]metric.AddOption
	replayOpt []metric.AddOption
	ackFail   metric.Int64Counter
	parked    metric.Int64Counter
	plainOpt  []metric.AddOption // wary.consumer only
}

// Inbox metric names.
const (
	metricInboxResults    = "wary.inbox.results"
	metricInboxAckFailure = "wary.inbox.ack_after_commit"
	metricInboxParked     = "wary.inbox.parked"
)

// allResults are the Results Handle returns.
var allResults = []Result{ResultApplied, ResultDuplicate, ResultStale, ResultGapRetried, ResultParked, ResultHeld, ResultFailed, ResultDeadLettered, ResultEarly}

// resultName is a Result's wary.inbox.result value.
func resultName(r Result) string {
	switch r {
	case ResultGapRetried:
		return "gap"
	case ResultDeadLettered:
		return "dead_lettered"
	case 0:
		return "failed"
	}
	return r.String()
}

func newInboxTel[Tx any](in *Inbox[Tx]) {
	t := &inboxTel{tracer: wotel.NewTracer(in.o.TracerProvider), name: "inbox " + in.consumer, consumer: wotel.Consumer.String(in.consumer)}
	in.tel = t
	m := wotel.Meter(in.o.MeterProvider)
	// A provider's errors leave no-op instruments: all a library can do.
	t.results, _ = m.Int64Counter(metricInboxResults, metric.WithUnit("{message}"),
		metric.WithDescription("Deliveries the inbox handled, by wary.inbox.result (applied, duplicate, stale, gap, parked, held, failed, dead_lettered), and parked messages replayed (replayed)."))
	t.ackFail, _ = m.Int64Counter(metricInboxAckFailure, metric.WithUnit("{message}"),
		metric.WithDescription("Deliveries committed whose ack then failed (ErrAckAfterCommit); their redelivery is a duplicate."))
	t.parked, _ = m.Int64Counter(metricInboxParked, metric.WithUnit("{message}"),
		metric.WithDescription("Messages parked, held ones included, until an operator replays or discards them."))
	opt := func(kv ...attribute.KeyValue) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{t.consumer}, kv...)...))}
	}
	t.resultOpt = make(map[Result][]metric.AddOption, len(allResults)+1)
	for _, r := range append(allResults, 0) {
		t.resultOpt[r] = opt(wotel.InboxResult.String(resultName(r)))
	}
	t.replayOpt = opt(wotel.InboxResult.String("replayed"))
	t.plainOpt = opt()
}

// result counts one delivery's result.
func (t *inboxTel) result(ctx context.Context, r Result) {
	o, ok := t.resultOpt[r]
	if !ok {
		o = t.resultOpt[0]
	}
	t.results.Add(ctx, 1, o...)
	if r == ResultParked || r == ResultHeld {
		t.parked.Add(ctx, 1, t.plainOpt...)
	}
}

// replayed counts a parked message replayed.
func (t *inboxTel) replayed(ctx context.Context) { t.results.Add(ctx, 1, t.replayOpt...) }

// ackFailed counts an ErrAckAfterCommit.
func (t *inboxTel) ackFailed(ctx context.Context) { t.ackFail.Add(ctx, 1, t.plainOpt...) }

// startHandle starts the inbox span of d: a child of ctx's span, or of the
// message's creation context when ctx has none.
func (t *inboxTel) startHandle(ctx context.Context, d *broker.Delivery) (context.Context, trace.Span) {
	if t.tracer.Off() {
		return ctx, nil
	}
	ctx = wotel.Parent(ctx, d.Message.Headers)
	if !t.tracer.On(ctx) {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, t.name)
	if span.IsRecording() {
		span.SetAttributes(t.consumer, wotel.MessageID.String(d.Message.ID))
		h := d.Message.Headers
		if id := h.Get(HeaderAggregateID); id != "" {
			v, _ := strconv.ParseInt(h.Get(HeaderAggregateVersion), 10, 64)
			span.SetAttributes(wotel.EventAttrs(id, v)...)
		}
	}
	return ctx, span
}

// endHandle counts the result, records it on the span and ends it.
func (t *inboxTel) endHandle(ctx context.Context, span trace.Span, r Result, err error) {
	t.result(ctx, r)
	if span == nil {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(wotel.InboxResult.String(resultName(r)))
		wotel.Error(span, err, "")
	}
	span.End()
}
