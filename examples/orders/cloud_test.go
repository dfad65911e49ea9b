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

	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// TestServiceBusEmulator runs the example on a Service Bus queue of the
// emulator, through the plain URL a user would give: the driver reads the
// queue's properties through the emulator's administration API, which
// WARY_SERVICEBUS_ADMIN_ENDPOINT names.
func TestServiceBusEmulator(t *testing.T) {
	serviceBusQueue(t)
	run(t, Config{Broker: serviceBusURL})
}

const serviceBusURL = "servicebus://orders"

// TestServiceBusEntities runs the example on the other entities the
// Service Bus guide's emulator command creates: a session queue and a
// topic subscription without sessions. Neither delays a Nack (the driver
// declares NackDelay false), so the example and the inbox must do without.
func TestServiceBusEntities(t *testing.T) {
	for _, tc := range []struct {
		name     string
		topology sbemu.Topology
		cfg      Config
	}{
		{"session queue", sbemu.Topology{Queues: []sbemu.Queue{{Name: "orders-s", RequiresSession: true, LockDuration: 5 * time.Second, MaxDeliveryCount: 10}}},
			Config{Broker: "servicebus://orders-s"}},
		{"subscription", sbemu.Topology{Topics: []sbemu.Topic{{Name: "events", Subscriptions: []sbemu.Subscription{{Name: "audit", LockDuration: 5 * time.Second, MaxDeliveryCount: 10}}}}},
			Config{Broker: "servicebus://events", Subscription: "servicebus://events/Subscriptions/audit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emu := sbemu.Start(t, tc.topology)
			t.Setenv(servicebus.ConnectionStringEnv, emu.ConnectionString)
			t.Setenv(servicebus.EnvAdminEndpoint, emu.AdminEndpoint)
			run(t, tc.cfg)
		})
	}
}

// serviceBusQueue starts the emulator with the queue orders and points the
// driver at it.
func serviceBusQueue(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "orders", LockDuration: 5 * time.Second, MaxDeliveryCount: 10}}})
	t.Setenv(servicebus.ConnectionStringEnv, emu.ConnectionString)
	t.Setenv(servicebus.EnvAdminEndpoint, emu.AdminEndpoint)
}

// TestTelemetryServiceBus is TestServiceBusEmulator with OpenTelemetry on
// (see runTraced): the trace context travels in application properties.
func TestTelemetryServiceBus(t *testing.T) {
	serviceBusQueue(t)
	runTraced(t, Config{Broker: serviceBusURL}, "servicebus", "orders")
}

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
