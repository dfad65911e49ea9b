package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/memory"
)

type order struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

// ordersQueue returns a memory broker with the queue topic "orders"
// (messages of up to maxSize bytes; 0: the default) and its subscription
// "billing", and the topic opened; both are closed when t ends.
func ordersQueue(t *testing.T, maxSize int) (*memory.Broker, *broker.Topic) {
	b := memory.New(nil)
	t.Cleanup(func() { b.Close() })
	if err := b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.Queue, MaxMessageSize: maxSize}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("orders", "billing"); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	return b, topic
}

// TestTypedDeadLettersUndecodable: a typed handler gets the decoded value
// of a good message; a body that is not JSON, and one marked as another
// encoding, never reach it and are dead-lettered with the reason, while the
// messages around them are handled.
func TestTypedDeadLettersUndecodable(t *testing.T) {
	ctx := t.Context()
	b, topic := ordersQueue(t, 0)
	first, err := broker.NewMessage(nil, "o-1", "k", order{ID: "o-1", Total: 42})
	if err != nil {
		t.Fatal(err)
	}
	if first.Headers.Get(broker.HeaderContentType) != "application/json" {
		t.Fatalf("NewMessage headers %v", first.Headers)
	}
	last, _ := broker.NewMessage(broker.JSON, "o-2", "k", order{ID: "o-2", Total: 7})
	notJSON := &broker.Message{ID: "bad-json", Key: "k", Body: []byte("{not json")}
	otherType := &broker.Message{ID: "bad-type", Key: "k", Headers: driver.Headers{{broker.HeaderContentType, "application/x-protobuf"}}, Body: []byte(`{"id":"x"}`)}
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
			reasons[d.Message.ID] = d.Message.Headers.Get(driver.HeaderDeadLetterReason)
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

// TestUndecodableReasonsBounded: a foreign content type of 200 KB holding
// a newline, and a number of a million digits (which encoding/json quotes
// whole), dead-letter with a reason of at most MaxReasonLen bytes, on one
// line, that still says what went wrong; Decode's own error is bounded
// too.
func TestUndecodableReasonsBounded(t *testing.T) {
	ctx := t.Context()
	b, topic := ordersQueue(t, 4<<20)
	longType := "application/x-" + strings.Repeat("a", 100<<10) + "\nX-Injected: yes" + strings.Repeat("b", 100<<10)
	bigNumber := []byte(`{"id":"x","total":1` + strings.Repeat("0", 1_000_000) + `}`)
	msgs := []*broker.Message{
		{ID: "long-type", Key: "k", Headers: driver.Headers{{broker.HeaderContentType, longType}}, Body: []byte(`{}`)},
		{ID: "big-number", Key: "k", Body: bigNumber},
	}
	if err := topic.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		_, err := broker.Decode[order](nil, broker.NewDetachedDelivery(m, 1))
		if !errors.Is(err, broker.ErrUndecodable) || len(err.Error()) > driver.MaxReasonLen || strings.Contains(err.Error(), "\n") {
			t.Errorf("Decode of %s: %d bytes: %.200q", m.ID, len(err.Error()), err)
		}
	}
	_, err := broker.Decode[order](nil, broker.NewDetachedDelivery(msgs[1], 1))
	if !errors.As(err, new(*json.UnmarshalTypeError)) || !broker.IsPermanent(err) {
		t.Errorf("Decode of a million digits: %.200v, want the codec's error reachable, permanent", err)
	}
	sub, err := b.OpenSubscription("orders", "billing", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	dlq, err := b.OpenDeadLetters("orders", "billing", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() {
		runErr <- sub.Run(rctx, broker.Typed(nil, func(context.Context, *broker.Delivery, order) error {
			t.Error("an undecodable message reached the handler")
			return nil
		}), nil)
	}()
	reasons := map[string]string{}
	for len(reasons) < 2 {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ds, err := dlq.Receive(wctx, 10)
		cancel()
		if err != nil {
			t.Fatalf("dead letters: %v (have %d)", err, len(reasons))
		}
		for _, d := range ds {
			reasons[d.Message.ID] = d.Message.Headers.Get(driver.HeaderDeadLetterReason)
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop()
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"long-type": "application/x-aaa", "big-number": "cannot unmarshal number"} {
		r := reasons[id]
		if len(r) > driver.MaxReasonLen || strings.ContainsAny(r, "\n\r") || !strings.Contains(r, want) || !strings.Contains(r, id) {
			t.Errorf("%s dead-lettered with a reason of %d bytes: %.300q", id, len(r), r)
		}
	}
}

// TestBoundReason: a reason is escaped to one printable line and cut on
// a character boundary to MaxReasonLen bytes, saying how much was cut; a
// bounded reason is left as it is.
func TestBoundReason(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain reason: it failed", "plain reason: it failed"},
		{"line 1\nline 2\r\t\x00\x7f\xff é \u2028", `line 1\nline 2\r\t\x00\x7f\xff é \u2028`},
	} {
		if got := driver.BoundReason(c.in); got != c.want {
			t.Errorf("BoundReason(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, in := range []string{
		strings.Repeat("é", 5000),
		strings.Repeat("a", driver.MaxReasonLen) + "b",
		strings.Repeat("\n", 2000),
		strings.Repeat("a", driver.MaxReasonLen-1) + "€",
	} {
		got := driver.BoundReason(in)
		if len(got) > driver.MaxReasonLen || !utf8.ValidString(got) || !strings.Contains(got, " bytes cut)") {
			t.Errorf("BoundReason(%.20q…) = %d bytes: %.60q…%q", in, len(got), got, got[max(0, len(got)-30):])
		}
		if again := driver.BoundReason(got); again != got {
			t.Errorf("BoundReason is not idempotent on %.60q", got)
		}
	}
	if got := driver.BoundReason(strings.Repeat("a", 3000)); got != strings.Repeat("a", 1005)+"…(1995 bytes cut)" {
		t.Errorf("BoundReason of 3000 bytes = %q", got)
	}
}

// FuzzBoundReason: whatever the text, the reason is valid UTF-8, printable,
// at most MaxReasonLen bytes, left as it is by a second pass, and holds the
// whole text when the text is short and printable.
func FuzzBoundReason(f *testing.F) {
	f.Add("plain")
	f.Add("a\nb\x00\xff")
	f.Add(strings.Repeat("é", 600))
	f.Fuzz(func(t *testing.T, s string) {
		got := driver.BoundReason(s)
		if len(got) > driver.MaxReasonLen || !utf8.ValidString(got) || strings.ContainsFunc(got, func(r rune) bool { return !strconv.IsPrint(r) }) {
			t.Fatalf("BoundReason(%q) = %q", s, got)
		}
		if driver.BoundReason(got) != got {
			t.Fatalf("BoundReason(%q) changes on a second pass", got)
		}
		if len(s) <= driver.MaxReasonLen && utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) && got != s {
			t.Fatalf("BoundReason(%q) = %q, want it as it is", s, got)
		}
	})
}
