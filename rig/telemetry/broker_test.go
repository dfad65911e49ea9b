package telemetry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
)

// memBroker opens orders and orders/billing on the memory broker, with
// the providers given (nil: the global ones).
func memBroker(t testing.TB, tp trace.TracerProvider, mp metric.MeterProvider) (*broker.Topic, *broker.Subscription) {
	t.Helper()
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	if err := b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.Queue}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("orders", "billing"); err != nil {
		t.Fatal(err)
	}
	tel := broker.Telemetry{TracerProvider: tp, MeterProvider: mp}
	topic, err := b.OpenTopic("orders", &memory.TopicOptions{TopicOptions: broker.TopicOptions{Telemetry: tel}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.OpenSubscription("orders", "billing", &memory.SubscriptionOptions{SubscriptionOptions: broker.SubscriptionOptions{Telemetry: tel}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topic.Close(); _ = sub.Close() })
	return topic, sub
}

// telBroker is memBroker with the SDK's span recorder and a manual metric
// reader.
func telBroker(t *testing.T) (*broker.Topic, *broker.Subscription, *tracetest.SpanRecorder, *sdkmetric.ManualReader, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	topic, sub := memBroker(t, tp, mp)
	return topic, sub, rec, reader, tp.Tracer("test")
}

func attrValue(attrs []attribute.KeyValue, key attribute.Key) attribute.Value {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestRunTelemetry: Publish's send span is a child of the caller's span and
// travels in the headers; Run's process span is its child and links to
// it; counters follow sends, deliveries and settlements.
func TestRunTelemetry(t *testing.T) {
	topic, sub, rec, reader, tracer := telBroker(t)
	ctx, caller := tracer.Start(t.Context(), "caller")
	headers := broker.Headers{{"a", "b"}}
	if err := topic.Publish(ctx, &broker.Message{ID: "m1", Headers: headers}); err != nil {
		t.Fatal(err)
	}
	caller.End()
	if len(headers) != 1 {
		t.Errorf("Publish modified the caller's headers: %v", headers)
	}
	// A message that carries a context already keeps it; the send span
	// links to it.
	_, other := tracer.Start(t.Context(), "other")
	other.End()
	carried := broker.Headers{{"traceparent", "00-" + other.SpanContext().TraceID().String() + "-" + other.SpanContext().SpanID().String() + "-01"}}
	if err := topic.Publish(t.Context(), &broker.Message{ID: "m2", Headers: carried}); err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		handled = map[string]trace.SpanContext{}
		failed  bool
		done    = make(chan struct{})
	)
	rctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		defer close(done)
		_ = sub.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			if d.Message.ID == "m1" && !failed {
				failed = true
				return errors.New("first attempt fails")
			}
			handled[d.Message.ID] = trace.SpanContextFromContext(ctx)
			if len(handled) == 2 {
				cancel()
			}
			return nil
		}, &broker.RunOptions{Backoff: broker.Backoff{Initial: time.Millisecond, Max: time.Millisecond}})
	}()
	<-done

	spans := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		id := attrValue(s.Attributes(), "messaging.message.id").AsString()
		spans[s.Name()+" "+id] = append(spans[s.Name()+" "+id], s)
	}
	send1 := spans["send orders m1"]
	if len(send1) != 1 || send1[0].Parent().SpanID() != caller.SpanContext().SpanID() || send1[0].SpanKind() != trace.SpanKindProducer {
		t.Fatalf("send span of m1: %v, want one producer span under the caller's", send1)
	}
	if got := attrValue(send1[0].Attributes(), "messaging.system").AsString(); got != "memory" {
		t.Errorf("messaging.system = %q", got)
	}
	proc := spans["process orders/billing m1"]
	if len(proc) != 2 {
		t.Fatalf("%d process spans of m1, want 2 (a failure and a success)", len(proc))
	}
	for _, p := range proc {
		if p.Parent().SpanID() != send1[0].SpanContext().SpanID() || p.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("process span: parent %s kind %v, want the send span, consumer", p.Parent().SpanID(), p.SpanKind())
		}
		if l := p.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != send1[0].SpanContext().SpanID() {
			t.Errorf("process span links %v, want the send span", l)
		}
	}
	if proc[0].Status().Code == 0 {
		t.Error("the failed attempt's process span has no error status")
	}
	if handled["m1"].SpanID() != proc[1].SpanContext().SpanID() {
		t.Error("the handler's ctx does not hold the process span")
	}
	send2 := spans["send orders m2"]
	if len(send2) != 1 || len(send2[0].Links()) != 1 || send2[0].Links()[0].SpanContext.SpanID() != other.SpanContext().SpanID() {
		t.Errorf("send span of m2 should link to the context the message carried: %v", send2)
	}
	if p := spans["process orders/billing m2"]; len(p) != 1 || p[0].Parent().SpanID() != other.SpanContext().SpanID() {
		t.Errorf("process span of m2 should be a child of the carried context")
	}

	got := settledCounts(t, reader)
	want := map[string]int64{"messaging.client.sent.messages": 2, "messaging.client.consumed.messages": 3,
		"wary.messages.settled{ack}": 2, "wary.messages.settled{nack}": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

// TestAckAllCounted: AckAll acknowledges several deliveries with one driver
// call, and each ack counts in wary.messages.settled{ack}.
func TestAckAllCounted(t *testing.T) {
	topic, sub, _, reader, _ := telBroker(t)
	ds := publishReceive(t, topic, sub, "a", "b")
	if errs := broker.AckAll(t.Context(), ds); errs != nil {
		t.Fatal(errs)
	}
	if got := settledCounts(t, reader)["wary.messages.settled{ack}"]; got != 2 {
		t.Errorf("wary.messages.settled{ack} = %d, want 2", got)
	}
}

// TestPublishWithoutTracing: with no provider set (the global no-op one)
// and no span in ctx, nothing is added to the message.
func TestPublishWithoutTracing(t *testing.T) {
	topic, sub := memBroker(t, nil, nil)
	if err := topic.Publish(t.Context(), &broker.Message{ID: "m"}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds[0].Message.Headers) != 0 {
		t.Errorf("headers %v, want none", ds[0].Message.Headers)
	}
}

// settledCounts reads reader's int64 sums by name, with the
// wary.settlement attribute as NAME{VALUE}; every point must name its
// destination.
func settledCounts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range s.DataPoints {
					k := m.Name
					if v, ok := p.Attributes.Value("wary.settlement"); ok {
						k += "{" + v.AsString() + "}"
					}
					if v, _ := p.Attributes.Value("messaging.destination.name"); v.AsString() == "" {
						t.Errorf("%s without messaging.destination.name", k)
					}
					got[k] += p.Value
				}
			}
		}
	}
	return got
}

// TestDeadLetterCounted: a delivery the application dead-letters counts in
// wary.messages.settled{dead_letter}, with its destination.
func TestDeadLetterCounted(t *testing.T) {
	topic, sub, _, reader, _ := telBroker(t)
	ds := publishReceive(t, topic, sub, "poison", "fine")
	for _, d := range ds {
		var err error
		if d.Message.ID == "poison" {
			err = d.DeadLetter(t.Context(), "cannot parse")
		} else {
			err = d.Ack(t.Context())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	got := settledCounts(t, reader)
	if got["wary.messages.settled{dead_letter}"] != 1 || got["wary.messages.settled{ack}"] != 1 || got["messaging.client.consumed.messages"] != 2 {
		t.Errorf("metrics %v, want one dead_letter, one ack, two consumed", got)
	}
}

// publishReceive publishes messages with the IDs given and receives them.
func publishReceive(t *testing.T, topic *broker.Topic, sub *broker.Subscription, ids ...string) []*broker.Delivery {
	t.Helper()
	msgs := make([]*broker.Message, len(ids))
	for i, id := range ids {
		msgs[i] = &broker.Message{ID: id}
	}
	if err := topic.Publish(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	var ds []*broker.Delivery
	for len(ds) < len(ids) {
		got, err := sub.Receive(t.Context(), len(ids)-len(ds))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, got...)
	}
	return ds
}
