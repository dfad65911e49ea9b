package servicebus_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// TestForeignReservedPropertiesNotTrusted: another producer's message that
// carries wary's own properties (the deliveries so far, the original ID of
// a scheduled copy, a dead-letter reason) is delivered as the message it
// is: its first delivery is attempt 1, so a nack does not dead-letter it;
// its ID is its MessageId; it does not read as dead-lettered; and no
// reserved header reaches the consumer.
func TestForeignReservedPropertiesNotTrusted(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue(t, sbemu.Entity{DeliveryLimit: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sender, err := e.client.NewSender(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(ctx)
	id := "foreign-1"
	err = sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte("x"), ApplicationProperties: map[string]any{
		"wary-attempts":               int64(1_000_000),
		"wary-id":                     "spoofed-id",
		driver.HeaderDeadLetterReason: "forged",
		"wary-dead-letter-source":     "forged",
		"DeadLetterReason":            "forged too",
		"wary-anything":               "forged",
		"app":                         "kept",
		broker.HeaderAggregateID:      "order-1", // an event-identity header a producer may set
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := servicebus.OpenSubscription(ctx, e.client, q, &servicebus.SubscriptionOptions{Admin: e.admin})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for attempt := 1; attempt <= 2; attempt++ {
		ds, err := sub.Receive(ctx, 1)
		if err != nil || len(ds) != 1 {
			t.Fatalf("receive %d: %v %v", attempt, ds, err)
		}
		d := ds[0]
		if d.Attempt != attempt || d.Message.ID != id {
			t.Errorf("delivery %d: attempt %d, ID %q; want attempt %d, ID %q", attempt, d.Attempt, d.Message.ID, attempt, id)
		}
		for k := range d.Message.Headers.All() {
			if driver.ReservedHeader(k) {
				t.Errorf("delivery %d: the reserved header %q reached the consumer", attempt, k)
			}
		}
		if d.Message.Headers.Get("app") != "kept" || d.Message.Headers.Get(broker.HeaderAggregateID) != "order-1" {
			t.Errorf("delivery %d: the producer's own headers were lost: %v", attempt, d.Message.Headers)
		}
		if attempt == 1 {
			if err := d.Nack(ctx, 0); err != nil {
				t.Fatalf("nack: %v", err)
			}
		} else if err := d.Ack(ctx); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
}
