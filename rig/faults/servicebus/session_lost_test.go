package servicebus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// A consumer's connection is reset while it holds a session and a message of
// it, and another receiver takes the session before the connection comes back.
// The SDK then retries the lost session as recoverable (re-attaching its link
// fails while the other holds it), so no call gives a definite answer. Once
// the session lock has ended, the driver must give the session up: the
// unsettled message's Ack reports ErrLockLost, and the slot serves other
// sessions again. (Found by the soak: eight such sessions held a consumer's
// eight slots, each Ack waited out SettleTimeout, and the run stalled.)
func TestSessionLostAfterConnectionReset(t *testing.T) {
	e := newEnv(t)
	if e.emu.Real {
		t.Skip("needs the emulator's port behind a proxy")
	}
	q := e.createQueue(t, sbemu.Entity{Sessions: true, Lock: 2 * time.Second})
	topic := e.openTopic(t, q)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topic.Publish(ctx, &broker.Message{Key: "S1", Body: []byte("0")}); err != nil {
		t.Fatal(err)
	}
	p, clientA := proxiedClient(t, e)
	// A settle may take a minute: long enough that only the driver's
	// giving up can end it within the test.
	a, err := servicebus.OpenSubscription(ctx, clientA, q, &servicebus.SubscriptionOptions{Admin: e.admin, MaxSessions: 1,
		SubscriptionOptions: broker.SubscriptionOptions{SettleTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ds, err := a.Receive(ctx, 1)
	if err != nil || len(ds) != 1 || string(ds[0].Message.Body) != "0" {
		t.Fatalf("consumer A: %v %v", ds, err)
	}
	if err := addResets(p); err != nil {
		t.Fatal(err)
	}
	// B takes the session as soon as the emulator lets it go (when it sees
	// A's connection reset, or when A's session lock expires), and keeps it.
	var b *azservicebus.SessionReceiver
	for b == nil {
		b, err = e.client.AcceptSessionForQueue(ctx, q, "S1", nil)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("B never got session S1: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // retry backoff
			}
		}
	}
	defer b.Close(context.WithoutCancel(ctx))
	renewing, stopRenew := context.WithCancel(ctx)
	defer stopRenew()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-renewing.Done():
				return
			case <-tick.C:
				_ = b.RenewSessionLock(renewing, nil)
			}
		}
	}()
	if err := removeResets(p); err != nil {
		t.Fatal(err)
	}
	if err := ds[0].Ack(ctx); !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("Ack of a message whose session B now holds: %v, want ErrLockLost", err)
	}
	// The message came back to B, its session's holder now.
	ms, err := b.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(ms) != 1 || string(ms[0].Body) != "0" {
		t.Fatalf("B: %v %v", ms, err)
	}
	if err := b.CompleteMessage(ctx, ms[0], nil); err != nil {
		t.Fatal(err)
	}
	stopRenew()
	<-renewed
	// A's slot is free again: it takes another session.
	if err := topic.Publish(ctx, &broker.Message{Key: "S2", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for {
		ds, err := a.Receive(ctx, 1)
		if err != nil {
			t.Fatalf("consumer A after losing S1: %v", err)
		}
		if len(ds) == 0 {
			continue // ReceiveWait passed without a message
		}
		if d := ds[0]; d.Message.Key != "S2" || string(d.Message.Body) != "x" {
			t.Fatalf("consumer A got %s/%s, want S2/x", d.Message.Key, d.Message.Body)
		}
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
}
