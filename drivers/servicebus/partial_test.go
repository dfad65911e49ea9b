package servicebus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// TestPublishPartlySent: a batch of [a valid message, a message over the
// entity's limit once encoded (its size as wary counts it fits)] sends the
// valid one and says so: the call may have been sent, the first message
// was, the second is too large and not sent.
func TestPublishPartlySent(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue(t, sbemu.Entity{})
	top := e.openTopic(t, q)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Many small headers: the AMQP encoding adds a few bytes to each,
	// more than the headroom the driver keeps.
	big := &broker.Message{ID: "big", Body: []byte("x"), Headers: broker.Headers{}}
	size := len(big.ID) + len(big.Body)
	for i := 0; ; i++ {
		k := fmt.Sprintf("h%d", i)
		if size+2*len(k) > top.Capabilities().MaxMessageSize {
			break
		}
		big.Headers = append(big.Headers, [2]string{k, k}) // distinct names: Set's scan would make this quadratic
		size += 2 * len(k)
	}
	err := top.Publish(ctx, &broker.Message{ID: "ok", Body: []byte("fine")}, big)
	var be *broker.Error
	if !errors.As(err, &be) || len(be.Messages) != 2 {
		t.Fatalf("got %v, want a publish error with 2 Messages", err)
	}
	if errors.Is(err, broker.ErrNotSent) || !errors.Is(err, broker.ErrMaybeSent) || !errors.Is(err, broker.ErrTooLarge) {
		t.Errorf("one of two sent: %v, want ErrMaybeSent and ErrTooLarge, not ErrNotSent", err)
	}
	if be.Messages[0] != nil {
		t.Errorf("the valid message: %v, want sent", be.Messages[0])
	}
	if m := be.Messages[1]; !errors.Is(m, broker.ErrNotSent) || !errors.Is(m, broker.ErrTooLarge) {
		t.Errorf("the large message: %v, want not sent and too large", m)
	}
	sub, err := servicebus.OpenSubscription(ctx, e.client, q, &servicebus.SubscriptionOptions{Admin: e.admin})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ds, err := sub.Receive(ctx, 10)
	if err != nil || len(ds) != 1 || ds[0].Message.ID != "ok" {
		t.Fatalf("received %v (%v), want the valid message alone", ds, err)
	}
}

// TestPublishIDOverServiceBusLimit: a MessageId or SessionId over Service
// Bus's 128 characters is refused before sending, as a publish error that
// is invalid and certainly not sent; in a batch, the others are not sent
// either, and say so.
func TestPublishIDOverServiceBusLimit(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("é", servicebus.MaxIDLen+1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top := e.openTopic(t, e.createQueue(t, sbemu.Entity{}))
	stop := e.openTopic(t, e.createQueue(t, sbemu.Entity{Sessions: true}))
	for name, c := range map[string]struct {
		top  *broker.Topic
		msgs []*broker.Message
	}{
		"message ID":        {top, []*broker.Message{{ID: long}}},
		"session ID":        {stop, []*broker.Message{{ID: "a", Key: long}}},
		"message ID, batch": {top, []*broker.Message{{ID: "fine"}, {ID: long}}},
	} {
		err := c.top.Publish(ctx, c.msgs...)
		var be *broker.Error
		if !errors.Is(err, broker.ErrNotSent) || !errors.Is(err, broker.ErrInvalid) || !errors.As(err, &be) || be.Op != "publish" {
			t.Errorf("%s: %v, want a publish error, invalid, not sent", name, err)
			continue
		}
		for i, m := range be.Messages {
			if !errors.Is(m, broker.ErrNotSent) {
				t.Errorf("%s: message %d: %v, want not sent", name, i, m)
			}
		}
	}
}
