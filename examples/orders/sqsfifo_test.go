//go:build sqsfifo

package main

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// TestSQSFIFO runs the example on a FIFO queue of fauxqs, the SQS
// emulator. Credentials come from the SDK's default chain, as a user's
// would.
func TestSQSFIFO(t *testing.T) {
	// SQS drops the relay's and the broker's copies (same deduplication
	// IDs, inside five minutes): the inbox sees none of them.
	runDedup(t, Config{Broker: sqsQueue(t)}, true)
}

// TestTelemetrySQSFIFO is TestSQSFIFO with OpenTelemetry on (see
// runTraced): the trace context travels in message attributes.
func TestTelemetrySQSFIFO(t *testing.T) {
	u := sqsQueue(t)
	name := strings.TrimPrefix(u[:strings.IndexByte(u, '?')], "sqsfifo://")
	runTracedDedup(t, Config{Broker: u}, "aws_sqs", name, true)
}

// sqsQueue starts fauxqs, creates a fresh FIFO queue and returns its
// sqsfifo:// URL.
func sqsQueue(t *testing.T) string {
	srv := sqsemu.Start(t, sqsemu.Options{})
	client := srv.NewClient(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	name := "wary-orders-" + newSuffix() + ".fifo"
	if _, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		string(types.QueueAttributeNameFifoQueue): "true", string(types.QueueAttributeNameVisibilityTimeout): "5",
	}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	q := url.Values{"region": {sqsemu.Region}, "endpoint": {srv.Endpoint}}
	return "sqsfifo://" + name + "?" + q.Encode()
}

// TestSQSFIFOSecondRunExplainsDedupWindow: a second run on the same queue
// inside SQS's 5-minute window publishes only IDs the broker already saw,
// so nothing arrives; the run says so, with the window and what to do,
// instead of "0 of N events settled (last error: <nil>)".
func TestSQSFIFOSecondRunExplainsDedupWindow(t *testing.T) {
	cfg := Config{Broker: sqsQueue(t)}
	runDedup(t, cfg, true)
	cfg.SettleTimeout = 5 * time.Second // nothing will come: the first run's IDs are all inside the window
	var out bytes.Buffer
	_, err := Run(t.Context(), &out, cfg)
	var dw *DedupWindowError
	if !errors.As(err, &dw) {
		t.Fatalf("second run: %v, want a DedupWindowError\n%s", err, out.String())
	}
	for _, want := range []string{"none of", "events arrived", "in the last 5m0s (per queue)", "same every run", "fresh queue"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second run's error lacks %q: %v", want, err)
		}
	}
}
