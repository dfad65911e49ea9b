package sqsfifo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// TestPublishPartlySent: of 12 messages whose 12th is over the queue's
// limit once encoded (its raw size fits), SQS receives the first 10 (the
// first request) and the error says exactly that: the call may have been
// sent, the first 10 were, the 11th was not attempted and the 12th is too
// large, neither sent.
func TestPublishPartlySent(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	url, _ := e.createQueue(t, sqsemu.QueueSpec{MaxSize: 2048})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	top, err := sqsfifo.OpenTopic(ctx, e.client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	msgs := make([]*broker.Message, 12)
	for i := range msgs {
		msgs[i] = &broker.Message{ID: sqsemu.UniqueName("m"), Key: "g", Body: []byte("small")}
	}
	// Under MaxMessageSize as the portable layer counts it, over the
	// queue's limit in base64.
	msgs[11].Body = []byte(strings.Repeat("\xff", top.Capabilities().MaxMessageSize-len(msgs[11].ID)-len("g")))
	err = top.Publish(ctx, msgs...)
	var be *broker.Error
	if !errors.As(err, &be) || len(be.Messages) != 12 {
		t.Fatalf("got %v, want a publish error with 12 Messages", err)
	}
	if errors.Is(err, broker.ErrNotSent) || !errors.Is(err, broker.ErrMaybeSent) || !errors.Is(err, broker.ErrTooLarge) {
		t.Errorf("10 of 12 sent: %v, want ErrMaybeSent and ErrTooLarge, not ErrNotSent", err)
	}
	for i, m := range be.Messages[:10] {
		if m != nil {
			t.Errorf("message %d: %v, want sent", i, m)
		}
	}
	if m := be.Messages[10]; !errors.Is(m, broker.ErrNotSent) || errors.Is(m, broker.ErrTooLarge) {
		t.Errorf("message 10: %v, want not sent, and not too large", m)
	}
	if m := be.Messages[11]; !errors.Is(m, broker.ErrNotSent) || !errors.Is(m, broker.ErrTooLarge) {
		t.Errorf("message 11: %v, want not sent and too large", m)
	}
	if n := e.count(ctx, t, url); n != 10 {
		t.Errorf("the queue holds %d messages, want 10", n)
	}
}
