//go:build trace

package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// traced is what -trace installs: an SDK tracer provider, set as the
// global one (wary's topics, subscriptions, outbox, relay and inbox use
// the global providers unless given others), that records every span in
// memory. Built in with -tags trace.
type traced struct {
	tp  *sdktrace.TracerProvider
	rec *tracetest.SpanRecorder
}

func installTracing() (*traced, error) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	return &traced{tp: tp, rec: rec}, nil
}

// orderSpans returns the spans of the traces that hold the outbox "create"
// spans of aggregate's events, in start order.
func orderSpans(spans []sdktrace.ReadOnlySpan, aggregate string) []sdktrace.ReadOnlySpan {
	traces := map[trace.TraceID]bool{}
	for _, s := range spans {
		if s.Name() == "create" && attr(s, "wary.aggregate.id") == aggregate {
			traces[s.SpanContext().TraceID()] = true
		}
	}
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if traces[s.SpanContext().TraceID()] {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	return out
}

// attr returns the value of span s's attribute key ("" if absent).
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// print writes the spans of aggregate's events to w: first as a tree (one
// line a span, children indented under their parent), then as the
// OpenTelemetry stdout exporter writes them.
func (t *traced) print(ctx context.Context, w io.Writer, aggregate string) error {
	if err := t.tp.ForceFlush(ctx); err != nil {
		return err
	}
	spans := orderSpans(t.rec.Ended(), aggregate)
	fmt.Fprintf(w, "\ntrace: the spans of %s, from Outbox.Add to the inbox commit (%d spans)\n", aggregate, len(spans))
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent().SpanID(); ids[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		fmt.Fprintf(w, "  %s%-*s %s %s\n", strings.Repeat("  ", depth), 22-2*depth, s.Name(), s.SpanContext().TraceID().String()[:8], spanNote(s))
		for _, c := range children[s.SpanContext().SpanID()] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	fmt.Fprintln(w, "\nstdout exporter:")
	exp, err := stdouttrace.New(stdouttrace.WithWriter(w), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	return exp.ExportSpans(ctx, spans)
}

// spanNote is the attributes worth a glance, in a fixed order.
func spanNote(s sdktrace.ReadOnlySpan) string {
	keys := []attribute.Key{"messaging.system", "messaging.destination.name", "messaging.message.id", "wary.aggregate.version", "wary.inbox.result"}
	var parts []string
	for _, k := range keys {
		if v := attr(s, string(k)); v != "" {
			parts = append(parts, string(k)+"="+v)
		}
	}
	if s.Status().Code != 0 {
		parts = append(parts, "error="+cmp.Or(s.Status().Description, "yes"))
	}
	return strings.Join(parts, " ")
}
