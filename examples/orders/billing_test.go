package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/testkit"
)

// TestBillingHandler runs the billing consumer's SQLite handler through the
// test kit: every event twice, reordered, the transaction rolled back once
// after the handler succeeded and the ack lost once after the commit. Each
// event's effect happens once, each order ends confirmed, and each is
// charged once. TestBillingHandlerPostgres (-tags postgres) runs the
// PostgreSQL handler through it alike.
func TestBillingHandler(t *testing.T) {
	store := testkit.SQLite(t)
	for _, q := range billingTables {
		if _, err := store.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	payments, err := keys.New(store, keys.Contract{Provider: "payments", Retention: 24 * time.Hour, Replays: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testBilling(t, testkit.New(t, store, &testkit.Options{Versions: billingVersions}), payments, billingSQLite(payments))
}

// testBilling runs billing, the handler under test, through kit, whose
// inbox checks versions first, and then the payments it staged.
func testBilling[Tx any](t *testing.T, kit *testkit.Kit[Tx], payments *keys.Caller[Tx], billing idem.Handler[Tx]) {
	var events []testkit.Event
	for _, id := range []string{"order-1", "order-2", "order-3"} {
		body := fmt.Appendf(nil, `{"order":%q,"total":42}`, id) // an OrderEvent
		events = append(events,
			testkit.Event{AggregateID: id, Version: 1, Type: "order.placed", Body: body},
			testkit.Event{AggregateID: id, Version: 2, Type: "order.confirmed", Body: body})
	}
	t.Log(kit.Run(billing, events...))

	kit.AssertOnce(t, kit.CountRows(`SELECT message_id FROM billing_effects`))
	kit.AssertRows(t, `SELECT id, version, status FROM billing_orders ORDER BY id`,
		"order-1 2 confirmed", "order-2 2 confirmed", "order-3 2 confirmed")
	provider := newProvider()
	if _, err := payments.CallStaged(t.Context(), provider.call, 0); err != nil {
		t.Fatal(err)
	}
	charges, _ := provider.totals()
	kit.AssertOnce(t, func(context.Context) (map[string]int, error) { return charges, nil },
		"payment:order-1:1", "payment:order-2:1", "payment:order-3:1")
}
