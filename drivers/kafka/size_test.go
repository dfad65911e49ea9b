package kafka_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestRecordFraming: the size check counts what the producer sends. A
// message within MaxMessageSize as the portable layer counts it, but whose
// many headers (each framed by two varints) leave no room for the
// dead-letter copy, is refused before anything is written; a message of
// exactly MaxMessageSize without headers is published, and dead-lettered
// even with a long reason (which is cut).
func TestRecordFraming(t *testing.T) {
	e := newTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	maxBytes := "4096"
	topic, dlq := uniqueName("framing"), uniqueName("framing-dlq")
	resps, err := e.admin.CreateTopics(ctx, 1, -1, map[string]*string{"max.message.bytes": &maxBytes}, topic, dlq)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	so := &kafka.SubscriptionOptions{DeadLetterTopic: dlq}
	top, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	limit := top.Capabilities().MaxMessageSize
	if limit <= 0 || limit >= 4096 {
		t.Fatalf("MaxMessageSize %d", limit)
	}

	many := &broker.Message{ID: "many", Headers: broker.Headers{}}
	for i := range 600 {
		many.Headers.Set(fmt.Sprintf("h%03d", i), "")
	}
	if n := 600*4 + len(many.ID); n > limit {
		t.Fatalf("the test's message (%d bytes) must fit MaxMessageSize (%d) as the portable layer counts", n, limit)
	}
	err = top.Publish(ctx, many)
	if !errors.Is(err, broker.ErrTooLarge) || !errors.Is(err, broker.ErrNotSent) {
		t.Fatalf("600 headers: %v, want ErrTooLarge and ErrNotSent", err)
	}
	// In a batch, the others are not sent either, and say so message by
	// message.
	err = top.Publish(ctx, &broker.Message{ID: "fine"}, many)
	var be *broker.Error
	if !errors.Is(err, broker.ErrTooLarge) || !errors.Is(err, broker.ErrNotSent) || !errors.As(err, &be) || len(be.Messages) != 2 ||
		!errors.Is(be.Messages[0], broker.ErrNotSent) || errors.Is(be.Messages[0], broker.ErrTooLarge) ||
		!errors.Is(be.Messages[1], broker.ErrNotSent) || !errors.Is(be.Messages[1], broker.ErrTooLarge) {
		t.Fatalf("a batch with 600 headers in its second message: %v (%v), want the second too large, neither sent", err, be)
	}
	ends, err := e.admin.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != 0 {
		t.Fatalf("the refused message was written (end offset %d)", o.Offset)
	}

	body := make([]byte, limit-len("full")) // incompressible: the broker measures compressed batches
	rand.Read(body)
	full := &broker.Message{ID: "full", Body: body}
	if err := top.Publish(ctx, full); err != nil {
		t.Fatalf("a message of MaxMessageSize: %v", err)
	}
	sub, err := e.openSub(ctx, t, topic, uniqueName("g"), so)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 1000)
	rand.Read(noise)
	reason := "é" + hex.EncodeToString(noise) // incompressible too
	if err := ds[0].DeadLetter(ctx, reason); err != nil {
		t.Fatalf("dead-lettering a message of MaxMessageSize with a long reason: %v", err)
	}
	dl, err := e.openDeadLetters(ctx, t, dlq, uniqueName("g"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	ds, err = dl.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := ds[0].Message.Headers.Get(driver.HeaderDeadLetterReason); len(r) > 512 || !strings.HasPrefix(r, reason[:100]) || !strings.HasSuffix(r, "…") {
		t.Fatalf("reason %d bytes: %q", len(r), r)
	}
}
