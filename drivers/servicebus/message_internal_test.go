package servicebus

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// TestPublishIDOverLimitSaysWhy: a MessageId over Service Bus's 128
// characters is refused before any network I/O (the topic has no sender)
// as a publish error, invalid and not sent, whose text says why and, in a
// call of several messages, which one; it names no other operation.
func TestPublishIDOverLimitSaysWhy(t *testing.T) {
	top := broker.NewTopic(&topic{entity: "q"}, nil)
	long := strings.Repeat("x", 200)
	why := "message ID is 200 characters, over Service Bus's MessageId limit of 128"

	err := top.Publish(context.Background(), &broker.Message{ID: long})
	if !errors.Is(err, broker.ErrInvalid) || !errors.Is(err, broker.ErrNotSent) {
		t.Errorf("%v: want invalid, not sent", err)
	}
	if want := "wary: publish (invalid) [not sent]: " + why; err == nil || err.Error() != want {
		t.Errorf("text %q, want %q", err, want)
	}

	err = top.Publish(context.Background(), &broker.Message{ID: "a"}, &broker.Message{ID: long}, &broker.Message{ID: "c"})
	var be *broker.Error
	if !errors.As(err, &be) || len(be.Messages) != 3 || !errors.Is(err, broker.ErrInvalid) || !errors.Is(err, broker.ErrNotSent) {
		t.Fatalf("%v: want invalid, not sent, with 3 Messages", err)
	}
	if want := "wary: publish (invalid) [0 of 3 sent, 1 failed]: message 1: " + why; err.Error() != want {
		t.Errorf("text %q, want %q", err, want)
	}
	for i, m := range be.Messages {
		if !errors.Is(m, broker.ErrNotSent) || errors.Is(m, broker.ErrInvalid) != (i == 1) || errors.Is(m, driver.ErrNotAttempted) == (i == 1) {
			t.Errorf("message %d: %v, want not sent, and invalid only for message 1", i, m)
		}
	}
}

// TestReceivedAs: a received message's As (driver.Message.As, which
// broker.Message.As calls) reaches the SDK's *azservicebus.ReceivedMessage
// it was read from, and nothing else.
func TestReceivedAs(t *testing.T) {
	rm := &azservicebus.ReceivedMessage{MessageID: "m", Body: []byte("b")}
	m := fromSB(rm, false)
	var got *azservicebus.ReceivedMessage
	if m.As == nil || !m.As.As(&got) || got != rm || m.As.As(new(int)) {
		t.Errorf("As reached %p, want %p", got, rm)
	}
}
