//go:build trace

package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	tnoop "go.opentelemetry.io/otel/trace/noop"
)

// TestTraceOutput: what -trace prints: order-1's two events, each a tree
// from the order service's span to the inbox commit, then the stdout
// exporter's JSON of the same spans.
func TestTraceOutput(t *testing.T) {
	tr, err := installTracing()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		otel.SetTracerProvider(tnoop.NewTracerProvider())
		_ = tr.tp.Shutdown(context.Background())
	})
	if _, err := Run(t.Context(), io.Discard, Config{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tr.print(t.Context(), &out, "order-1"); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	tree, exported, ok := strings.Cut(s, "\nstdout exporter:\n")
	if !ok {
		t.Fatalf("no exporter output:\n%s", s)
	}
	for _, want := range []string{"order placed", "order confirmed", "    create ", "      publish ", "      inbox billing ",
		"        inbox claim ", "        handler ", "        inbox commit ", "wary.inbox.result=applied", "wary.inbox.result=duplicate"} {
		if !strings.Contains(tree, want) {
			t.Errorf("tree lacks %q:\n%s", want, tree)
		}
	}
	if strings.Contains(tree, "order-2") {
		t.Errorf("tree shows another order:\n%s", tree)
	}
	if n, m := strings.Count(exported, `"ChildSpanCount"`), strings.Count(tree, "\n  "); n != m || n == 0 {
		t.Errorf("the exporter wrote %d spans, the tree has %d", n, m)
	}
}
