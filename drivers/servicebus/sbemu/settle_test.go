package sbemu_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// A peek-locked message that is neither settled nor expired stays with its
// receiver: nobody else gets it, and it is still in the queue.
func TestPeekLockHoldsUntilDisposition(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "held"}}})
	send(t, client, "held", msg("a"))
	r1 := queueReceiver(t, client, "held", nil)
	got := receiveN(t, r1, 1)[0]

	r2 := queueReceiver(t, client, "held", nil)
	send(t, client, "held", msg("b"))
	second := receiveN(t, r2, 1)[0]
	if string(second.Body) != "b" {
		t.Fatalf("second receiver got %q while %q was locked, want b", second.Body, got.Body)
	}
	peeked, err := r2.PeekMessages(ctxT(t), 10, nil)
	if err != nil {
		t.Fatalf("PeekMessages: %v", err)
	}
	if len(peeked) != 2 {
		t.Fatalf("peek sees %v, want both locked messages", bodies(peeked))
	}
	if err := r1.CompleteMessage(ctxT(t), got, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
	if err := r2.CompleteMessage(ctxT(t), second, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
}

// Abandon (modified) makes the message available again with the delivery
// count increased.
func TestAbandonCountsDelivery(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "abandon"}}})
	send(t, client, "abandon", msg("a"))
	r := queueReceiver(t, client, "abandon", nil)
	first := receiveN(t, r, 1)[0]
	if err := r.AbandonMessage(ctxT(t), first, &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"why": "retry"},
	}); err != nil {
		t.Fatalf("AbandonMessage: %v", err)
	}
	again := receiveN(t, r, 1)[0]
	if string(again.Body) != "a" || again.DeliveryCount != first.DeliveryCount+1 {
		t.Fatalf("after abandon got %q with delivery count %d, want a with %d", again.Body, again.DeliveryCount, first.DeliveryCount+1)
	}
	if *again.SequenceNumber != *first.SequenceNumber {
		t.Fatalf("sequence number changed: %d -> %d", *first.SequenceNumber, *again.SequenceNumber)
	}
	if again.ApplicationProperties["why"] != "retry" {
		t.Fatalf("properties to modify not applied: %v", again.ApplicationProperties)
	}
	if again.LockToken == first.LockToken {
		t.Fatal("a new delivery must carry a new lock token")
	}
	if err := r.CompleteMessage(ctxT(t), again, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
}

// Released messages (the SDK releases what reaches its link after
// ReceiveMessages returned) go back without counting a delivery.
func TestReleaseDoesNotCount(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "release"}}})
	send(t, client, "release", msg("a"))
	r1 := queueReceiver(t, client, "release", nil)
	// ask for 5: one arrives, four credits stay on r1's link
	ctx := ctxT(t)
	var first []*azservicebus.ReceivedMessage
	for len(first) == 0 {
		msgs, err := r1.ReceiveMessages(ctx, 5, nil)
		if err != nil {
			t.Fatalf("ReceiveMessages: %v", err)
		}
		first = msgs
	}
	// b reaches r1's link (the only receiver) and r1's releaser releases it
	send(t, client, "release", msg("b"))
	r2 := queueReceiver(t, client, "release", nil)
	got := receiveN(t, r2, 1)[0]
	if string(got.Body) != "b" || got.DeliveryCount != 1 {
		t.Fatalf("got %q with delivery count %d, want b with 1", got.Body, got.DeliveryCount)
	}
}

// Dead-lettering (rejected with com.microsoft:dead-letter) moves the message
// to <queue>/$DeadLetterQueue with its reason and description.
func TestDeadLetter(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "dlq", LockDuration: 7 * time.Second}}})
	send(t, client, "dlq", msg("poison"))
	r := queueReceiver(t, client, "dlq", nil)
	got := receiveN(t, r, 1)[0]
	if err := r.DeadLetterMessage(ctxT(t), got, &azservicebus.DeadLetterOptions{
		Reason:             ptr("BadInput"),
		ErrorDescription:   ptr("field x missing"),
		PropertiesToModify: map[string]any{"stage": "parse"},
	}); err != nil {
		t.Fatalf("DeadLetterMessage: %v", err)
	}
	receiveNone(t, r, 300*time.Millisecond)
	dlq := queueReceiver(t, client, "dlq", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dead := receiveN(t, dlq, 1)[0]
	if string(dead.Body) != "poison" {
		t.Fatalf("dead-letter queue has %q", dead.Body)
	}
	if dead.DeadLetterReason == nil || *dead.DeadLetterReason != "BadInput" ||
		dead.DeadLetterErrorDescription == nil || *dead.DeadLetterErrorDescription != "field x missing" {
		t.Fatalf("reason %v description %v", dead.DeadLetterReason, dead.DeadLetterErrorDescription)
	}
	// the dead-letter queue locks for its queue's lock duration (not the 60s default)
	if dead.LockedUntil == nil || dead.LockedUntil.After(time.Now().Add(7*time.Second)) {
		t.Fatalf("dead-letter lock until %v, want within the queue's 7s lock duration", dead.LockedUntil)
	}
	if dead.ApplicationProperties["stage"] != "parse" {
		t.Fatalf("properties to modify not applied: %v", dead.ApplicationProperties)
	}
	if err := dlq.CompleteMessage(ctxT(t), dead, nil); err != nil {
		t.Fatalf("CompleteMessage on the dead-letter queue: %v", err)
	}
}

// Defer (modified, undeliverable-here) hides the message from receives;
// receive-by-sequence-number returns it locked and it is settled through
// $management update-disposition.
func TestDeferAndReceiveDeferred(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "defer"}}})
	send(t, client, "defer", msg("later"), msg("now"))
	r := queueReceiver(t, client, "defer", nil)
	first := receiveN(t, r, 1)[0]
	if string(first.Body) != "later" {
		t.Fatalf("FIFO: got %q first", first.Body)
	}
	if err := r.DeferMessage(ctxT(t), first, nil); err != nil {
		t.Fatalf("DeferMessage: %v", err)
	}
	next := receiveN(t, r, 1)[0]
	if string(next.Body) != "now" {
		t.Fatalf("deferred message was delivered again: got %q", next.Body)
	}
	if err := r.CompleteMessage(ctxT(t), next, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
	peeked, err := r.PeekMessages(ctxT(t), 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))})
	if err != nil || len(peeked) != 1 || peeked[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("peek: %v %v", err, peeked)
	}
	deferred, err := r.ReceiveDeferredMessages(ctxT(t), []int64{*first.SequenceNumber}, nil)
	if err != nil {
		t.Fatalf("ReceiveDeferredMessages: %v", err)
	}
	if len(deferred) != 1 || string(deferred[0].Body) != "later" {
		t.Fatalf("ReceiveDeferredMessages: %v", bodies(deferred))
	}
	if deferred[0].LockToken == ([16]byte{}) || deferred[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("deferred message: lock token %x state %v", deferred[0].LockToken, deferred[0].State)
	}
	// deferring counts as a delivery attempt
	if deferred[0].DeliveryCount != first.DeliveryCount+1 {
		t.Fatalf("deferred message delivery count %d, want %d", deferred[0].DeliveryCount, first.DeliveryCount+1)
	}
	// settles over $management (update-disposition)
	if err := r.CompleteMessage(ctxT(t), deferred[0], nil); err != nil {
		t.Fatalf("CompleteMessage (deferred): %v", err)
	}
	if _, err := r.ReceiveDeferredMessages(ctxT(t), []int64{*first.SequenceNumber}, nil); err == nil {
		t.Fatal("a completed deferred message can still be received by sequence number")
	}
}

// Renewing a lock goes through $management with the token in RFC byte
// order; the delivery tag carried it in .NET order. A wrong conversion on
// either side makes the renewal fail with lock lost.
func TestRenewLock(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "renew", LockDuration: 30 * time.Second}}})
	send(t, client, "renew", msg("a"))
	r := queueReceiver(t, client, "renew", nil)
	got := receiveN(t, r, 1)[0]
	before := *got.LockedUntil
	// let the clock move past the millisecond of the receive, then renew once
	waitFor(t, 50*time.Millisecond)
	if err := r.RenewMessageLock(ctxT(t), got, nil); err != nil {
		t.Fatalf("RenewMessageLock: %v", err)
	}
	if renewed := *got.LockedUntil; !renewed.After(before) {
		t.Fatalf("locked-until did not move: %v -> %v", before, renewed)
	}
	// a token the emulator never issued is refused
	bogus := *got
	bogus.LockToken = [16]byte{1, 2, 3}
	if err := r.RenewMessageLock(ctxT(t), &bogus, nil); sbCode(err) != azservicebus.CodeLockLost {
		t.Fatalf("renew with an unknown token: %v, want lock lost", err)
	}
	if err := r.CompleteMessage(ctxT(t), got, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
}

// Lock expiry hands the message out again with the delivery count
// increased, and a settlement with the expired lock reports lock lost.
func TestLockExpiryRedelivers(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "expiry", LockDuration: time.Second}}})
	send(t, client, "expiry", msg("a"))
	r := queueReceiver(t, client, "expiry", nil)
	first := receiveN(t, r, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var again []*azservicebus.ReceivedMessage
	for len(again) == 0 {
		msgs, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil {
			t.Fatalf("waiting for redelivery: %v", err)
		}
		again = msgs
	}
	if string(again[0].Body) != "a" || again[0].DeliveryCount != first.DeliveryCount+1 {
		t.Fatalf("redelivered %q with count %d, want a with %d", again[0].Body, again[0].DeliveryCount, first.DeliveryCount+1)
	}
	if !again[0].LockedUntil.After(*first.LockedUntil) {
		t.Fatalf("new lock %v not after the expired one %v", again[0].LockedUntil, first.LockedUntil)
	}
	if err := r.CompleteMessage(ctxT(t), first, nil); sbCode(err) != azservicebus.CodeLockLost {
		t.Fatalf("complete with the expired lock: %v, want lock lost", err)
	}
	if err := r.CompleteMessage(ctxT(t), again[0], nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
}

// Past MaxDeliveryCount the message moves to the dead-letter queue with
// reason MaxDeliveryCountExceeded.
func TestMaxDeliveryCount(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "maxdc", MaxDeliveryCount: 2}}})
	send(t, client, "maxdc", msg("a"))
	r := queueReceiver(t, client, "maxdc", nil)
	for i := 1; i <= 2; i++ {
		got := receiveN(t, r, 1)[0]
		if got.DeliveryCount != uint32(i) {
			t.Fatalf("delivery %d has count %d", i, got.DeliveryCount)
		}
		if err := r.AbandonMessage(ctxT(t), got, nil); err != nil {
			t.Fatalf("AbandonMessage: %v", err)
		}
	}
	dlq := queueReceiver(t, client, "maxdc", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dead := receiveN(t, dlq, 1)[0]
	if string(dead.Body) != "a" || dead.DeadLetterReason == nil || *dead.DeadLetterReason != "MaxDeliveryCountExceeded" {
		t.Fatalf("dead-lettered %q reason %v", dead.Body, dead.DeadLetterReason)
	}
	peeked, err := r.PeekMessages(ctxT(t), 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))})
	if err != nil || len(peeked) != 0 {
		t.Fatalf("message still in the queue: %v %v", err, bodies(peeked))
	}
}

// Receive-and-delete: the message is gone once delivered.
func TestReceiveAndDelete(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "rad"}}})
	send(t, client, "rad", msg("a"), msg("b"))
	r := queueReceiver(t, client, "rad", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	got := receiveN(t, r, 2)
	if bodies(got)[0] != "a" || bodies(got)[1] != "b" {
		t.Fatalf("got %v", bodies(got))
	}
	if got[0].LockedUntil != nil {
		t.Fatalf("receive-and-delete message carries a lock until %v", got[0].LockedUntil)
	}
	peeker := queueReceiver(t, client, "rad", nil)
	peeked, err := peeker.PeekMessages(ctxT(t), 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))})
	if err != nil || len(peeked) != 0 {
		t.Fatalf("peek after receive-and-delete: %v %v", err, bodies(peeked))
	}
}

// A message larger than one AMQP frame (64 KiB both ways) arrives intact.
func TestLargeMessage(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "large"}}})
	body := bytes.Repeat([]byte("0123456789abcdef"), 200*1024/16)
	send(t, client, "large", &azservicebus.Message{Body: body})
	r := queueReceiver(t, client, "large", nil)
	got := receiveN(t, r, 1)[0]
	if !bytes.Equal(got.Body, body) {
		t.Fatalf("body of %d bytes came back as %d bytes", len(body), len(got.Body))
	}
	if err := r.CompleteMessage(ctxT(t), got, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
	// past the entity's maximum message size (256 KiB, the Standard tier's)
	sender, err := client.NewSender("large", nil)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	defer sender.Close(context.Background())
	err = sender.SendMessage(ctxT(t), &azservicebus.Message{Body: bytes.Repeat([]byte("x"), 300*1024)}, nil)
	if !errors.Is(err, azservicebus.ErrMessageTooLarge) {
		t.Fatalf("sending 300 KiB: %v, want ErrMessageTooLarge", err)
	}
}

// waitFor pauses a poll loop between attempts.
func waitFor(t *testing.T, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	<-timer.C
}
