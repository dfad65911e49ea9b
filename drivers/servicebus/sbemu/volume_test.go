package sbemu_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// More peek-lock deliveries on one receiver than the emulator's window of
// deliveries in flight per AMQP session: every settled delivery must free its
// slot, or the emulator stalls (rhea throws on overflow). Also sends batches
// (message-format 0x80013700).
func TestManyDeliveriesOneReceiver(t *testing.T) {
	const n = 700
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "volume"}}, OutgoingWindow: 256})
	sender, err := client.NewSender("volume", nil)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	defer sender.Close(context.Background())
	for sent := 0; sent < n; {
		batch, err := sender.NewMessageBatch(ctxT(t), nil)
		if err != nil {
			t.Fatalf("NewMessageBatch: %v", err)
		}
		for sent < n {
			if err := batch.AddMessage(msg(fmt.Sprint(sent)), nil); err != nil {
				break // batch full
			}
			sent++
		}
		if err := sender.SendMessageBatch(ctxT(t), batch, nil); err != nil {
			t.Fatalf("SendMessageBatch: %v", err)
		}
	}
	r := queueReceiver(t, client, "volume", nil)
	// (order is not asserted: the SDK releases what reaches its link between
	// two ReceiveMessages calls, and released messages may come back later)
	seen := map[string]bool{}
	for len(seen) < n {
		msgs, err := r.ReceiveMessages(ctxT(t), 100, nil)
		if err != nil {
			t.Fatalf("ReceiveMessages after %d: %v", len(seen), err)
		}
		for _, m := range msgs {
			if seen[string(m.Body)] {
				t.Fatalf("message %q delivered twice", m.Body)
			}
			seen[string(m.Body)] = true
			if err := r.CompleteMessage(ctxT(t), m, nil); err != nil {
				t.Fatalf("CompleteMessage %q: %v", m.Body, err)
			}
		}
	}
}
