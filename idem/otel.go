package idem

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/store"
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

// eventAttrs are wary.aggregate.id and wary.aggregate.version.
func eventAttrs(aggregateID string, version int64) []attribute.KeyValue {
	a := []attribute.KeyValue{wotel.AggregateID.String(aggregateID)}
	if version != 0 {
		a = append(a, wotel.AggregateVersion.Int64(version))
	}
	return a
}

// startAdd starts the create span of each row and records its context in
// the row's headers (a copy: the caller's map is not modified). The
// returned function ends the spans with the outcome of the write.
func startAdd(ctx context.Context, tracer wotel.Tracer, rows []store.OutboxMessage) func(error) {
	if tracer.Off() {
		return noEnd
	}
	var spans []trace.Span
	for i := range rows {
		r := &rows[i]
		pctx := wotel.Parent(ctx, r.Headers)
		if !tracer.On(pctx) {
			return noEnd
		}
		sctx, span := tracer.Start(pctx, "create", trace.WithSpanKind(trace.SpanKindProducer))
		if !span.SpanContext().IsValid() {
			return noEnd // nothing traces: no span has a context
		}
		if span.IsRecording() {
			span.SetAttributes(wotel.OperationType.String("create"), wotel.OperationName.String("create"), wotel.MessageID.String(r.ID))
			span.SetAttributes(eventAttrs(r.AggregateID, r.Version)...)
		}
		r.Headers = wotel.Inject(sctx, r.Headers)
		spans = append(spans, span)
	}
	return func(err error) {
		for _, s := range spans {
			wotel.Error(s, err, "")
			s.End()
		}
	}
}

// noEnd is startAdd's result when nothing traces.
var noEnd = func(error) {}

// relayTel is a relay's instrumentation.
type relayTel struct {
	tracer      wotel.Tracer
	meter       metric.Meter
	publishDur  metric.Float64Histogram
	commitToPub metric.Float64Histogram
	okOpt       []metric.RecordOption
	failOpt     []metric.RecordOption
}

// Relay metric names.
const (
	metricRelayPublish     = "wary.relay.publish.duration"
	metricRelayCommitToPub = "wary.relay.commit_to_publish.duration"
	metricOutboxBacklog    = "wary.outbox.backlog"
	metricOutboxOldest     = "wary.outbox.oldest_unsent.age"
	metricOutboxQuarantine = "wary.outbox.quarantined"
)

func newRelayTel(r *Relay) {
	m := wotel.Meter(r.o.MeterProvider)
	t := &relayTel{tracer: wotel.NewTracer(r.o.TracerProvider), meter: m}
	// A provider's errors leave no-op instruments: all a library can do.
	t.publishDur, _ = m.Float64Histogram(metricRelayPublish, metric.WithUnit("s"),
		metric.WithDescription("Duration of the relay's Publish call for one outbox row, by outcome (error.type on failure)."))
	t.commitToPub, _ = m.Float64Histogram(metricRelayCommitToPub, metric.WithUnit("s"),
		metric.WithDescription("Time from an outbox row's creation (its transaction) to its confirmed publish."))
	t.okOpt = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet())}
	t.failOpt = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(wotel.ErrorType.String("publish")))}
	r.tel = t
}

// observeOutbox registers the outbox gauges, read from the store at each
// collection, until the returned function is called (Run does, when it
// returns): a relay that is not running reports no backlog.
func (r *Relay) observeOutbox() (stop func()) {
	m := r.tel.meter
	backlog, _ := m.Int64ObservableGauge(metricOutboxBacklog, metric.WithUnit("{row}"),
		metric.WithDescription("Outbox rows committed and not yet published (pending, due or backing off)."))
	oldest, _ := m.Float64ObservableGauge(metricOutboxOldest, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest unsent (pending or quarantined) outbox row; 0 when none."))
	quar, _ := m.Int64ObservableGauge(metricOutboxQuarantine, metric.WithUnit("{row}"),
		metric.WithDescription("Quarantined outbox rows, each blocking its aggregate."))
	if backlog == nil || oldest == nil || quar == nil {
		return func() {}
	}
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		h, err := r.store.OutboxHealth(ctx, r.o.Now())
		if err != nil {
			return err
		}
		o.ObserveInt64(backlog, h.Backlog)
		o.ObserveFloat64(oldest, h.OldestUnsentAge.Seconds())
		o.ObserveInt64(quar, h.Quarantined)
		return nil
	}, backlog, oldest, quar)
	if err != nil {
		return func() {}
	}
	return func() { _ = reg.Unregister() }
}

// relaySpan is one row's publish, between startPublish and endPublish.
type relaySpan struct {
	span  trace.Span // nil when tracing is off
	start time.Time
}

// startPublish starts the publish span of row, a child of the creation
// context stored with it.
func (t *relayTel) startPublish(ctx context.Context, row *store.OutboxRow) (context.Context, relaySpan) {
	start := time.Now()
	if t.tracer.Off() {
		return ctx, relaySpan{start: start}
	}
	if sc := wotel.Extract(row.Headers); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	if !t.tracer.On(ctx) {
		return ctx, relaySpan{start: start}
	}
	ctx, span := t.tracer.Start(ctx, "publish")
	if span.IsRecording() {
		span.SetAttributes(wotel.OperationType.String("send"), wotel.OperationName.String("publish"), wotel.MessageID.String(row.ID),
			wotel.Sequence.Int64(row.Sequence))
		span.SetAttributes(eventAttrs(row.AggregateID, row.Version)...)
	}
	return ctx, relaySpan{span: span, start: start}
}

// endPublish ends the span and records the latencies.
func (t *relayTel) endPublish(ctx context.Context, s relaySpan, row *store.OutboxRow, now time.Time, err error) {
	if err != nil {
		t.publishDur.Record(ctx, time.Since(s.start).Seconds(), t.failOpt...)
		if s.span != nil {
			wotel.Error(s.span, err, "")
			s.span.End()
		}
		return
	}
	t.publishDur.Record(ctx, time.Since(s.start).Seconds(), t.okOpt...)
	if !row.CreatedAt.IsZero() {
		t.commitToPub.Record(ctx, max(now.Sub(row.CreatedAt), 0).Seconds(), t.okOpt...)
	}
	if s.span != nil {
		s.span.End()
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

// allResults are the Results Handle and HandleBatch return.
var allResults = []Result{ResultApplied, ResultDuplicate, ResultStale, ResultGapRetried, ResultParked, ResultHeld, ResultFailed, ResultDeadLettered}

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

// batch counts the results of a batch.
func (t *inboxTel) batch(ctx context.Context, rs []Result) {
	for _, r := range rs {
		t.result(ctx, r)
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
		if id := h[HeaderAggregateID]; id != "" {
			v, _ := strconv.ParseInt(h[HeaderAggregateVersion], 10, 64)
			span.SetAttributes(eventAttrs(id, v)...)
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
