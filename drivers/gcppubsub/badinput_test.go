package gcppubsub_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/gcppubsub"
)

// TestBadInput: a message that breaks Pub/Sub's limits (attribute name,
// value and count, reserved names, ordering key, size) is refused with a
// typed error, not sent, and nothing of its batch is sent; the good
// messages published after it all arrive, once.
func TestBadInput(t *testing.T) {
	e := newTestEnv(t)
	c := e.create(t, subSpec{AckDeadline: 10 * time.Second, Ordering: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	top, _ := e.open(t, c)
	many := broker.Headers{}
	for i := range gcppubsub.MaxAttributes {
		many = append(many, [2]string{fmt.Sprintf("h%d", i), "v"})
	}
	for _, tc := range []struct {
		name string
		m    *broker.Message
		want error
	}{
		{"attribute value over 1024 bytes", &broker.Message{Headers: broker.Headers{{"big", strings.Repeat("v", gcppubsub.MaxAttributeValue+1)}}}, broker.ErrTooLarge},
		{"attribute name over 256 bytes", &broker.Message{Headers: broker.Headers{{strings.Repeat("k", gcppubsub.MaxAttributeKey+1), "v"}}}, broker.ErrTooLarge},
		{"over 100 attributes", &broker.Message{Headers: many}, broker.ErrTooLarge},
		{"name reserved by Google", &broker.Message{Headers: broker.Headers{{"googthing", "v"}}}, broker.ErrInvalid},
		{"ordering key over 1024 bytes", &broker.Message{Key: strings.Repeat("k", gcppubsub.MaxOrderingKey+1)}, broker.ErrTooLarge},
		{"over 10 MB", &broker.Message{Body: make([]byte, gcppubsub.MaxPublishBytes)}, broker.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.m.ID = "bad"
			good := &broker.Message{ID: "good-" + strings.ReplaceAll(tc.name, " ", "-"), Body: []byte("ok")}
			err := top.Publish(ctx, good, tc.m)
			if !errors.Is(err, tc.want) {
				t.Fatalf("publish: %v, want %v", err, tc.want)
			}
			if errors.Is(err, broker.ErrMaybeSent) {
				t.Fatalf("publish: %v says maybe sent", err)
			}
			t.Logf("%v", err)
		})
	}
	if n := len(e.srv.Fake.Messages()); n != 0 {
		t.Fatalf("pstest holds %d messages after refused batches, want 0", n)
	}
	if err := top.Publish(ctx, &broker.Message{ID: "after", Body: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if n := len(e.srv.Fake.Messages()); n != 1 {
		t.Fatalf("pstest holds %d messages, want 1", n)
	}
}
