package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// An event's identity travels in its message's headers: the outbox writes
// them (Event.Headers), and a handler behind version checks reads them
// back. A message without them is no event. (The inbox's flows, which need
// a store, run in the examples of idem/sqlite.)
func ExampleParseEvent() {
	ev := idem.Event{AggregateID: "acct-1", Version: 3, Type: "deposit"}
	m := &broker.Message{ID: "acct-1-v3", Headers: ev.Headers()}

	got, err := idem.ParseEvent(m)
	fmt.Printf("%s v%d %s %v\n", got.AggregateID, got.Version, got.Type, err)
	_, err = idem.ParseEvent(&broker.Message{ID: "plain"})
	fmt.Println(errors.Is(err, idem.ErrNoEvent))
	// Output:
	// acct-1 v3 deposit <nil>
	// true
}

// OrderPlaced is an event's body.
type OrderPlaced struct {
	Order string `json:"order"`
	Total int    `json:"total"`
}

// Typed decodes each body before the handler sees it; the inbox calls the
// Handler it returns in the transaction that claims the delivery (here
// called directly, without a transaction). A body that does not decode
// never reaches the handler: the inbox dead-letters it, or parks it.
func ExampleTyped() {
	ctx := context.Background()
	h := idem.Typed(nil, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery, o OrderPlaced) error {
		fmt.Printf("invoice %s for %d\n", o.Order, o.Total)
		return nil
	})

	fmt.Println(h(ctx, nil, broker.NewDetachedDelivery(&broker.Message{ID: "m1", Body: []byte(`{"order":"order-1","total":42}`)}, 1)))
	err := h(ctx, nil, broker.NewDetachedDelivery(&broker.Message{ID: "m2", Body: []byte(`not json`)}, 1))
	fmt.Println(errors.Is(err, broker.ErrUndecodable))
	// Output:
	// invoice order-1 for 42
	// <nil>
	// true
}
