package main

import (
	"bytes"
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	mnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"
)

// The whole mission with OpenTelemetry on: the SDK's span recorder and a
// manual metric reader as the global providers (the brokers are opened by
// URL, so they take the global ones, as the outbox, relay and inbox do).

func TestTelemetryMemory(t *testing.T) { runTraced(t, Config{}, "memory", "orders") }

func runTraced(t *testing.T, cfg Config, system, dest string) {
	runTracedDedup(t, cfg, system, dest, false)
}

// runTracedDedup is runTraced on a broker that drops copies inside its
// deduplication window (SQS FIFO): no duplicate reaches the inbox.
func runTracedDedup(t *testing.T, cfg Config, system, dest string, brokerDedups bool) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetTracerProvider(tnoop.NewTracerProvider())
		otel.SetMeterProvider(mnoop.NewMeterProvider())
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	var out bytes.Buffer
	rep, err := Run(t.Context(), &out, cfg)
	if err != nil {
		t.Log("\n" + out.String())
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("report not OK: %+v\n%s", rep, out.String())
	}
	spans := rec.Ended()
	checkOrderTrace(t, spans, "order-1/placed", system, dest)
	if !brokerDedups {
		checkDuplicate(t, spans, duplicated)
	}
	checkMetrics(t, reader, rep, system, dest)
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// checkOrderTrace checks that the spans of message id form one trace:
// create (Outbox.Add, under the order service's span) → publish (relay) →
// send (broker; for a batch, a span linked to the message), and create → inbox (applied) → inbox claim, handler,
// inbox commit; the inbox span's parent is the create span, so the
// context travelled in the message's headers through the broker.
func checkOrderTrace(t *testing.T, spans []sdktrace.ReadOnlySpan, id, system, dest string) {
	t.Helper()
	var create sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "create" && attrOf(s, "messaging.message.id").AsString() == id {
			create = s
		}
	}
	if create == nil {
		t.Fatalf("no create span for %s", id)
	}
	if !create.Parent().IsValid() || create.SpanKind() != trace.SpanKindProducer {
		t.Errorf("create span: parent %v (want the order service's span), kind %v", create.Parent(), create.SpanKind())
	}
	tid := create.SpanContext().TraceID()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var in []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() == tid {
			byID[s.SpanContext().SpanID()] = s
			in = append(in, s)
		}
	}
	parentName := func(s sdktrace.ReadOnlySpan) string {
		if p, ok := byID[s.Parent().SpanID()]; ok {
			return p.Name()
		}
		return ""
	}
	var applied sdktrace.ReadOnlySpan
	count := map[string]int{}
	for _, s := range in {
		count[s.Name()]++
		switch s.Name() {
		case "publish":
			if s.Parent().SpanID() != create.SpanContext().SpanID() {
				t.Errorf("publish span's parent is %q, want create", parentName(s))
			}
		case "send " + dest:
			if parentName(s) != "publish" || s.SpanKind() != trace.SpanKindProducer {
				t.Errorf("send span: parent %q, kind %v; want publish, producer", parentName(s), s.SpanKind())
			}
			if got := attrOf(s, "messaging.system").AsString(); got != system {
				t.Errorf("send span: messaging.system %q, want %q", got, system)
			}
			if got := attrOf(s, "messaging.destination.name").AsString(); got != dest {
				t.Errorf("send span: messaging.destination.name %q, want %q", got, dest)
			}
		case "inbox billing":
			if s.Parent().SpanID() != create.SpanContext().SpanID() {
				t.Errorf("inbox span's parent is %q, want create (the context in the message headers)", parentName(s))
			}
			if attrOf(s, "wary.inbox.result").AsString() == "applied" {
				applied = s
			}
			if got := attrOf(s, "wary.aggregate.id").AsString(); got != "order-1" {
				t.Errorf("inbox span: wary.aggregate.id %q", got)
			}
		case "inbox claim", "handler", "inbox commit":
			if parentName(s) != "inbox billing" {
				t.Errorf("%s span's parent is %q, want the inbox span", s.Name(), parentName(s))
			}
		}
	}
	// The relay publishes a claimed batch with one Publish call: the
	// broker's send span of a batch is a span of the relay's own, linked
	// to each message's context (the messaging conventions' batch send).
	if count["send "+dest] == 0 {
		for _, s := range spans {
			if s.Name() != "send "+dest {
				continue
			}
			for _, l := range s.Links() {
				if l.SpanContext.TraceID() == tid {
					count["send "+dest]++
				}
			}
		}
	}
	for _, name := range []string{"create", "publish", "send " + dest, "inbox billing", "inbox claim", "handler", "inbox commit"} {
		if count[name] == 0 {
			t.Errorf("trace of %s has no %q span (has %v)", id, name, count)
		}
	}
	if applied == nil {
		t.Fatalf("trace of %s has no inbox span with wary.inbox.result=applied (%v)", id, count)
	}
	children := map[string]bool{}
	for _, s := range in {
		if s.Parent().SpanID() == applied.SpanContext().SpanID() {
			children[s.Name()] = true
		}
	}
	if !children["inbox claim"] || !children["handler"] || !children["inbox commit"] {
		t.Errorf("the applied inbox span's children are %v, want inbox claim, handler and inbox commit", children)
	}
}

// checkDuplicate checks that the broker's duplicate of id shows as an
// inbox span with wary.inbox.result=duplicate, without a handler span.
func checkDuplicate(t *testing.T, spans []sdktrace.ReadOnlySpan, id string) {
	t.Helper()
	results := map[string]int{}
	var dup sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "inbox billing" && attrOf(s, "messaging.message.id").AsString() == id {
			r := attrOf(s, "wary.inbox.result").AsString()
			results[r]++
			if r == "duplicate" {
				dup = s
			}
		}
	}
	if dup == nil {
		t.Fatalf("no inbox span of %s with wary.inbox.result=duplicate: %v", id, results)
	}
	for _, s := range spans {
		if s.Parent().SpanID() == dup.SpanContext().SpanID() && s.Name() == "handler" {
			t.Errorf("the duplicate of %s ran the handler", id)
		}
	}
}

// checkMetrics compares the metrics with the history's counts.
func checkMetrics(t *testing.T, reader *sdkmetric.ManualReader, rep Report, system, dest string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	// sum adds the int64 sum points of name whose attributes include want.
	sum := func(name string, want ...attribute.KeyValue) (int64, bool) {
		var n int64
		found := false
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != name {
					continue
				}
				var pts []metricdata.DataPoint[int64]
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					pts = d.DataPoints
				case metricdata.Gauge[int64]:
					pts = d.DataPoints
				}
			points:
				for _, p := range pts {
					for _, kv := range want {
						if v, ok := p.Attributes.Value(kv.Key); !ok || v != kv.Value {
							continue points
						}
					}
					n += p.Value
					found = true
				}
			}
		}
		return n, found
	}
	histCount := func(name string) uint64 {
		var n uint64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
					for _, p := range h.DataPoints {
						n += p.Count
					}
				}
			}
		}
		return n
	}
	tot := rep.Totals
	dst := []attribute.KeyValue{attribute.String("messaging.system", system), attribute.String("messaging.destination.name", dest)}
	eq := func(what string, got int64, want int) {
		t.Helper()
		if got != int64(want) {
			t.Errorf("%s = %d, want %d", what, got, want)
		}
	}
	sent, _ := sum("messaging.client.sent.messages", dst...)
	// Every relay publish (history: sent, copies included) reached the
	// broker, plus the copy the chaos topic made.
	eq("messaging.client.sent.messages", sent, tot.Sent+1)
	eq("messaging.client.sent.messages (the example's count)", sent, rep.Publishes)
	consumed, _ := sum("messaging.client.consumed.messages", attribute.String("messaging.system", system))
	eq("messaging.client.consumed.messages", consumed, tot.Delivered)
	settled, _ := sum("wary.messages.settled", attribute.String("messaging.system", system))
	eq("wary.messages.settled (every delivery settled once)", settled, tot.Delivered)
	dl, _ := sum("wary.messages.settled", attribute.String("wary.settlement", "dead_letter"))
	eq("wary.messages.settled{dead_letter}", dl, 0)
	result := func(r string) int64 {
		n, _ := sum("wary.inbox.results", attribute.String("wary.consumer", "billing"), attribute.String("wary.inbox.result", r))
		return n
	}
	// Every delivery went through the inbox once, but the one the consumer
	// nacked as if it died.
	var handled int64
	for _, r := range []string{"applied", "duplicate", "stale", "gap", "parked", "held", "failed", "dead_lettered"} {
		handled += result(r)
	}
	eq("wary.inbox.results (all kinds) + the injected nack", handled+1, tot.Delivered)
	eq("wary.inbox.results{applied} + {replayed}", result("applied")+result("replayed"), tot.Applied)
	eq("wary.inbox.results{duplicate}", result("duplicate"), int(rep.Inbox.Duplicates))
	eq("wary.inbox.results{gap}", result("gap"), int(rep.Inbox.Retried))
	parked, _ := sum("wary.inbox.parked")
	eq("wary.inbox.parked", parked, int(rep.Inbox.Parked))
	ackFail, _ := sum("wary.inbox.ack_after_commit")
	eq("wary.inbox.ack_after_commit", ackFail, int(rep.Inbox.AckFailures))
	// The relay timed each publish that the history recorded as sent.
	if got := histCount("wary.relay.commit_to_publish.duration"); got != uint64(tot.Sent) {
		t.Errorf("wary.relay.commit_to_publish.duration has %d points, want %d", got, tot.Sent)
	}
	if got := histCount("wary.relay.publish.duration"); got < uint64(tot.Sent) {
		t.Errorf("wary.relay.publish.duration has %d points, want at least %d", got, tot.Sent)
	}
	// The relays ran Drain, not Run: no outbox gauges (idem's tests check
	// them on a running relay).
	if _, found := sum("wary.outbox.backlog"); found {
		t.Error("wary.outbox.backlog reported without a running relay")
	}
}
