package servicebus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// TestNackAfterLockExpiryMakesNoCopy: Nack(delay) on a queue without
// sessions schedules a copy and completes the original. When the lock has
// already expired (the service is redelivering the original), the driver
// reports the lock lost and schedules nothing: a copy would be a second
// delivery of the message, and the original's complete would fail.
func TestNackAfterLockExpiryMakesNoCopy(t *testing.T) {
	e := newEnv(t)
	if e.emu.Real {
		t.Skip("reads the emulator's entity state")
	}
	q := e.createQueue(t, sbemu.Entity{Lock: time.Second})
	topic := e.openTopic(t, q)
	sub, err := servicebus.OpenSubscription(t.Context(), e.client, q, &servicebus.SubscriptionOptions{Admin: e.admin})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := topic.Publish(ctx, &broker.Message{ID: "m1", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	first, err := sub.Receive(ctx, 1)
	if err != nil || len(first) != 1 {
		t.Fatalf("first receive: %v %v", first, err)
	}
	// The service redelivers the message once its lock has expired: that
	// redelivery is the signal that the first delivery's lock is gone.
	again, err := sub.Receive(ctx, 1)
	if err != nil || len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("redelivery: %v %v", again, err)
	}
	err = first[0].Nack(ctx, time.Minute)
	if !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("Nack after the lock expired: %v, want ErrLockLost", err)
	}
	st, err := e.emu.State(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 1 {
		t.Fatalf("the queue holds %d messages after the stale nack, want 1 (no scheduled copy)", st.Messages)
	}
	if err := again[0].Ack(ctx); err != nil {
		t.Fatalf("ack of the redelivery: %v", err)
	}
}
