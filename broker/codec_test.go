package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
)

type order struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

// TestTypedDeadLettersUndecodable: a typed handler gets the decoded value
// of a good message; a body that is not JSON, and one marked as another
// encoding, never reach it and are dead-lettered with the reason, while the
// messages around them are handled.
func TestTypedDeadLettersUndecodable(t *testing.T) {
	ctx := t.Context()
	b := memory.New(nil)
	defer b.Close()
	if err := b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.Queue}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("orders", "billing"); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	first, err := broker.NewMessage(nil, "o-1", "k", order{ID: "o-1", Total: 42})
	if err != nil {
		t.Fatal(err)
	}
	if first.Headers[broker.HeaderContentType] != "application/json" {
		t.Fatalf("NewMessage headers %v", first.Headers)
	}
	last, _ := broker.NewMessage(broker.JSON{}, "o-2", "k", order{ID: "o-2", Total: 7})
	notJSON := &broker.Message{ID: "bad-json", Key: "k", Body: []byte("{not json")}
	otherType := &broker.Message{ID: "bad-type", Key: "k", Headers: map[string]string{broker.HeaderContentType: "application/x-protobuf"}, Body: []byte(`{"id":"x"}`)}
	if err := topic.Publish(ctx, first, notJSON, otherType, last); err != nil {
		t.Fatal(err)
	}
	sub, err := b.OpenSubscription("orders", "billing", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	rctx, stop := context.WithCancel(ctx)
	var got []order
	err = sub.Run(rctx, broker.Typed(nil, func(_ context.Context, d *broker.Delivery, o order) error {
		got = append(got, o)
		if len(got) == 2 {
			stop()
		}
		return nil
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (order{"o-1", 42}) || got[1] != (order{"o-2", 7}) {
		t.Fatalf("handled %+v, want o-1 and o-2 decoded", got)
	}
	dlq, err := b.OpenDeadLetters("orders", "billing", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	reasons := map[string]string{}
	for len(reasons) < 2 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ds, err := dlq.Receive(wctx, 10)
		cancel()
		if err != nil {
			t.Fatalf("dead letters: %v (have %v)", err, reasons)
		}
		for _, d := range ds {
			reasons[d.Message.ID] = d.Message.Headers[broker.HeaderDeadLetterReason]
		}
	}
	if r := reasons["bad-json"]; !strings.Contains(r, "undecodable") || !strings.Contains(r, "bad-json") {
		t.Errorf("bad-json dead-lettered with reason %q", r)
	}
	if r := reasons["bad-type"]; !strings.Contains(r, "application/x-protobuf") {
		t.Errorf("bad-type dead-lettered with reason %q", r)
	}
}

func TestDecodeErrorIsPermanent(t *testing.T) {
	d := broker.NewDetachedDelivery(&broker.Message{ID: "m", Body: []byte("[")}, 1)
	_, err := broker.Decode[order](nil, d)
	if !errors.Is(err, broker.ErrUndecodable) || !broker.IsPermanent(err) {
		t.Fatalf("Decode of a broken body: %v, want ErrUndecodable, permanent", err)
	}
}

// TestChainOrder: the first middleware is the outermost, and Timeout gives
// the handler a deadline.
func TestChainOrder(t *testing.T) {
	var trace []string
	mark := func(name string) broker.Middleware {
		return func(h broker.Handler) broker.Handler {
			return func(ctx context.Context, d *broker.Delivery) error {
				trace = append(trace, name)
				return h(ctx, d)
			}
		}
	}
	var deadline bool
	h := broker.Chain(func(ctx context.Context, d *broker.Delivery) error {
		trace = append(trace, "handler")
		_, deadline = ctx.Deadline()
		return nil
	}, mark("a"), mark("b"), broker.Timeout(time.Minute))
	if err := h(t.Context(), broker.NewDetachedDelivery(&broker.Message{ID: "m"}, 1)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(trace, ",") != "a,b,handler" || !deadline {
		t.Fatalf("trace %v, deadline %t; want a,b,handler with a deadline", trace, deadline)
	}
}
