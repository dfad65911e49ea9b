package main

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/conformance/emulators/sbemu"
	"github.com/wary-go/wary/conformance/emulators/sqsemu"
	"github.com/wary-go/wary/drivers/servicebus"
)

// TestServiceBusEmulator runs the example on a Service Bus queue of the
// emulator. The emulator serves the administration API on a port of its
// own, which a servicebus:// URL cannot name, so the URL declares the
// queue's properties (read_entity=false).
func TestServiceBusEmulator(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "orders", LockDuration: 5 * time.Second, MaxDeliveryCount: 10}}})
	t.Setenv(servicebus.ConnectionStringEnv, emu.ConnectionString)
	run(t, Config{Broker: "servicebus://orders?read_entity=false&lock_duration=5s&max_delivery_count=10"})
}

// TestSQSFIFO runs the example on a FIFO queue of fauxqs, the SQS
// emulator. Credentials come from the SDK's default chain, as a user's
// would.
func TestSQSFIFO(t *testing.T) {
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
	// SQS drops the relay's and the broker's copies (same deduplication
	// IDs, inside five minutes): the inbox sees none of them.
	runDedup(t, Config{Broker: "sqsfifo://" + name + "?" + q.Encode()}, true)
}
