package idemtest

import (
	"context"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// testParkedHeaders: a parked message keeps its headers byte for byte,
// also names and values that are not UTF-8 or hold NUL and control bytes
// (a foreign producer's), and replay hands them back unchanged.
func testParkedHeaders[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("headers", nil)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	want := broker.Headers{
		{"plain", "value"},
		{"latin1", "caf\xe9"},
		{"bad\xffname", "\xc3\x28"},
		{"nul", "a\x00b"},
		{"bytes", string(all)},
		{"empty", ""},
		{"json-looking", `{"a":1}`},
		{"utf8", "日本\u2028"},
	}
	q := NewQueue(Caps)
	q.Push(&broker.Message{ID: "h1", Headers: want.Clone(), Body: []byte("x")})
	d := receive(t, q, q.Subscription(nil))
	r, err := in.Handle(e.Ctx, d, func(context.Context, Tx, *broker.Delivery) error {
		return &idem.ParkError{Reason: "park it", Now: true}
	})
	if r != idem.ResultParked || err != nil {
		t.Fatalf("Handle: %v, %v; want parked", r, err)
	}
	parked, err := in.Parked(e.Ctx, idem.ParkedFilter{})
	if err != nil || len(parked) != 1 {
		t.Fatalf("parked: %d, %v", len(parked), err)
	}
	if got := parked[0].Headers; !got.Equal(want) {
		for k, v := range want.All() {
			if got.Get(k) != v {
				t.Errorf("header %q: got %q, want %q", k, got.Get(k), v)
			}
		}
		t.Errorf("parked headers: %d, want %d, byte for byte", len(got), len(want))
	}
	var replayed broker.Headers
	if _, err := in.Replay(e.Ctx, "", func(_ context.Context, _ Tx, d *broker.Delivery) error {
		replayed = d.Message.Headers
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !replayed.Equal(want) {
		t.Errorf("replayed headers differ from the delivered ones")
	}
}
