package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
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
// window the retried publish arrives too; on an SQS FIFO queue (fauxqs)
// the run publishes and consumes there, and a second run on the same
// queue is not swallowed by the first run's dedup window.
func TestBrokerFlag(t *testing.T) {
	out := quickstart(t, "-broker", "mem://quickstart-plain")
	has(t, out, "broker: mem://quickstart-plain", "done: 5 messages handled: this broker has no dedup window")

	srv := sqsemu.Start(t, sqsemu.Options{})
	queueURL, _ := sqsemu.CreateQueue(t, srv.NewClient(t, nil), sqsemu.QueueSpec{NamePrefix: "quickstart"})
	name := queueURL[strings.LastIndexByte(queueURL, '/')+1:]
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	u := "sqsfifo://" + name + "?endpoint=" + srv.Endpoint + "&region=" + sqsemu.Region
	for range 2 {
		out := quickstart(t, "-broker", u)
		has(t, out, "broker: sqsfifo://"+name, "handle order-1/created@", "done: 4 distinct events handled, the duplicate publish was dropped")
	}

	var out2, errout bytes.Buffer
	if err := run(t.Context(), []string{"-broker", "kafka://orders?brokers=127.0.0.1:1"}, &out2, &errout); err == nil || !strings.Contains(err.Error(), "-subscription") {
		t.Errorf("kafka without -subscription: %v, want an error naming -subscription", err)
	}
}
