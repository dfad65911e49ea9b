package sbemu_test

import (
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// Sending and a peek-lock receive with complete; checks the annotations the
// SDK turns into SequenceNumber, EnqueuedTime, LockedUntil and the lock token.
func TestSendReceiveComplete(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "basic"}}})
	before := time.Now().Add(-time.Minute)
	m := msg("hello")
	m.MessageID = ptr("id-1")
	m.ApplicationProperties = map[string]any{"i32": int32(7), "i64": int64(1) << 40, "s": "x", "b": true}
	send(t, client, "basic", m)

	r := queueReceiver(t, client, "basic", nil)
	got := receiveN(t, r, 1)[0]
	if string(got.Body) != "hello" || got.MessageID != "id-1" {
		t.Fatalf("got body %q id %q", got.Body, got.MessageID)
	}
	if got.SequenceNumber == nil || *got.SequenceNumber != 1 {
		t.Fatalf("sequence number %v, want 1", got.SequenceNumber)
	}
	if got.EnqueuedTime == nil || got.EnqueuedTime.Before(before) {
		t.Fatalf("enqueued time %v", got.EnqueuedTime)
	}
	if got.LockedUntil == nil || !got.LockedUntil.After(*got.EnqueuedTime) {
		t.Fatalf("locked until %v", got.LockedUntil)
	}
	if got.LockToken == ([16]byte{}) {
		t.Fatal("no lock token")
	}
	if got.DeliveryCount != 1 {
		t.Fatalf("delivery count %d, want 1", got.DeliveryCount)
	}
	for k, want := range m.ApplicationProperties {
		if got.ApplicationProperties[k] != want {
			t.Fatalf("application property %s = %#v (%T), want %#v (%T)", k, got.ApplicationProperties[k], got.ApplicationProperties[k], want, want)
		}
	}
	if err := r.CompleteMessage(ctxT(t), got, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
	peeked, err := r.PeekMessages(ctxT(t), 10, nil)
	if err != nil {
		t.Fatalf("PeekMessages: %v", err)
	}
	if len(peeked) != 0 {
		t.Fatalf("completed message still there: %v", bodies(peeked))
	}
}

func ptr[T any](v T) *T { return &v }

func sbCode(err error) azservicebus.Code {
	var sbErr *azservicebus.Error
	if err != nil && errors.As(err, &sbErr) {
		return sbErr.Code
	}
	return ""
}
