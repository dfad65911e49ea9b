package outbox

import (
	"context"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/internal/wotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"time"
)

// startAdd starts the create span of each row and records its context in
// the row's headers (a copy: the caller's map is not modified). The
// returned function ends the spans with the outcome of the write.
func startAdd(ctx context.Context, tracer wotel.Tracer, rows []Message) func(error) {
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
			span.SetAttributes(wotel.EventAttrs(r.AggregateID, r.Version)...)
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
	metricStreamLag        = "wary.outbox.stream.lag"
	metricStreamLagAge     = "wary.outbox.stream.lag_age"
	metricStreamReleased   = "wary.outbox.stream.released"
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
func (r *Relay) observeOutbox(src seam.Source[Row]) (stop func()) {
	m := r.tel.meter
	backlog, _ := m.Int64ObservableGauge(metricOutboxBacklog, metric.WithUnit("{row}"),
		metric.WithDescription("Outbox rows committed and not yet published (pending, due or backing off)."))
	oldest, _ := m.Float64ObservableGauge(metricOutboxOldest, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest unsent (pending or quarantined) outbox row; 0 when none."))
	quar, _ := m.Int64ObservableGauge(metricOutboxQuarantine, metric.WithUnit("{row}"),
		metric.WithDescription("Quarantined outbox rows, each blocking its aggregate."))
	lag, _ := m.Int64ObservableGauge(metricStreamLag, metric.WithUnit("By"),
		metric.WithDescription("Log the outbox stream's slot retains beyond its confirmed position (a streaming source)."))
	lagAge, _ := m.Float64ObservableGauge(metricStreamLagAge, metric.WithUnit("s"),
		metric.WithDescription("How far behind the outbox stream's confirmed position is, in time (a streaming source)."))
	released, _ := m.Int64ObservableCounter(metricStreamReleased, metric.WithUnit("{release}"),
		metric.WithDescription("Times a relay dropped the outbox stream's slot because it retained more log than the WAL budget (a streaming source)."))
	if backlog == nil || oldest == nil || quar == nil || lag == nil || lagAge == nil || released == nil {
		return func() {}
	}
	insts := []metric.Observable{backlog, oldest, quar}
	streamer, _ := r.st.(streamStatuser)
	if src.State().Kind != "stream" {
		streamer = nil
	}
	if streamer != nil {
		insts = append(insts, lag, lagAge, released)
	}
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		h, err := r.st.OutboxHealth(ctx, r.o.Now())
		if err != nil {
			return err
		}
		o.ObserveInt64(backlog, h.Backlog)
		o.ObserveFloat64(oldest, h.OldestUnsentAge.Seconds())
		o.ObserveInt64(quar, h.Quarantined)
		if streamer != nil {
			st, err := streamer.OutboxStreamStatus(ctx)
			if err != nil {
				return err
			}
			if st.Exists {
				o.ObserveInt64(lag, st.LagBytes)
				o.ObserveFloat64(lagAge, st.LagAge.Seconds())
			}
			o.ObserveInt64(released, st.Released)
		}
		return nil
	}, insts...)
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
// context stored with it; start is when its publish starts (one reading
// of the clock for a batch published at once).
func (t *relayTel) startPublish(ctx context.Context, row *Row, start time.Time) (context.Context, relaySpan) {
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
		span.SetAttributes(wotel.EventAttrs(row.AggregateID, row.Version)...)
	}
	return ctx, relaySpan{span: span, start: start}
}

// endPublish ends the span and records the latencies; end is when the
// publish ended, now the relay's clock then.
func (t *relayTel) endPublish(ctx context.Context, s relaySpan, row *Row, end, now time.Time, err error) {
	if err != nil {
		t.publishDur.Record(ctx, end.Sub(s.start).Seconds(), t.failOpt...)
		if s.span != nil {
			wotel.Error(s.span, err, "")
			s.span.End()
		}
		return
	}
	t.publishDur.Record(ctx, end.Sub(s.start).Seconds(), t.okOpt...)
	if !row.CreatedAt.IsZero() {
		t.commitToPub.Record(ctx, max(now.Sub(row.CreatedAt), 0).Seconds(), t.okOpt...)
	}
	if s.span != nil {
		s.span.End()
	}
}
