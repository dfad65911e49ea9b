package main

import (
	"bytes"
	"strings"
	"testing"
)

func quickstart(t *testing.T, args ...string) string {
	t.Helper()
	var out, errout bytes.Buffer
	if err := run(t.Context(), args, &out, &errout); err != nil {
		t.Fatalf("quickstart %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errout.String())
	}
	return out.String()
}

func has(t *testing.T, out string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(out, p) {
			t.Errorf("output lacks %q:\n%s", p, out)
		}
	}
}

// TestDefaultBroker: without flags it runs on the embedded broker with the
// sqsfifo profile, whose dedup window drops the retried publish.
func TestDefaultBroker(t *testing.T) {
	out := quickstart(t)
	has(t, out, "broker: mem://orders?profile=sqsfifo", "handle order-1/created ", "done: 4 distinct events handled, the duplicate publish was dropped")
}

// TestBrokerFlag: -broker is honoured. On a memory broker without a dedup
// window the retried publish arrives too (sqsfifo_test.go runs it on an SQS
// FIFO queue, under -tags sqsfifo).
func TestBrokerFlag(t *testing.T) {
	out := quickstart(t, "-broker", "mem://quickstart-plain")
	has(t, out, "broker: mem://quickstart-plain", "done: 5 messages handled: this broker has no dedup window")

	var out2, errout bytes.Buffer
	if err := run(t.Context(), []string{"-broker", "kafka://orders?brokers=127.0.0.1:1"}, &out2, &errout); err == nil || !strings.Contains(err.Error(), "-subscription") {
		t.Errorf("kafka without -subscription: %v, want an error naming -subscription", err)
	}
}
