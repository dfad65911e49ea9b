package admin_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/admin"
	"github.com/wary-go/wary/idem/sqlite"
)

// An inbox parks a message it cannot apply yet; the operator lists the
// park and replays the aggregate to the topic the consumer reads, which
// then processes it again.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "admin")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	b := memory.New(nil)
	defer b.Close()
	_ = b.CreateTopic("orders", nil)
	_ = b.CreateSubscription("orders", "billing")
	topic, _ := b.OpenTopic("orders", nil)
	defer topic.Close()
	sub, _ := b.OpenSubscription("orders", "billing", nil)
	defer sub.Close()

	// The consumer parks order-1's payment: the order is not there yet.
	in, err := idem.NewInbox(st, "billing", sub.Capabilities(), nil)
	if err != nil {
		log.Fatal(err)
	}
	paid := &broker.Message{ID: "order-1/paid", Key: "order-1", Headers: broker.Headers{{broker.HeaderAggregateID, "order-1"}}, Body: []byte(`{"paid":42}`)}
	r, _ := in.Handle(ctx, broker.NewDetachedDelivery(paid, 1), func(context.Context, *sql.Tx, *broker.Delivery) error {
		return &idem.ParkError{Reason: "order-1 unknown", Now: true}
	})
	fmt.Println("handled:", r)

	// The operator looks, then replays.
	a, err := admin.New(ctx, st, nil)
	if err != nil {
		log.Fatal(err)
	}
	ps, _ := a.Parked(ctx, "", idem.ParkedFilter{NoBody: true})
	for _, p := range ps {
		fmt.Printf("parked: %s %s (%s)\n", p.Consumer, p.MessageID, p.Reason)
	}
	replayed, err := a.ReplayParked(ctx, topic, "billing", []string{"order-1"}, &admin.ReplayOptions{By: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replayed:", len(replayed))

	// The consumer gets it again, and applies it this time.
	ds, _ := sub.Receive(ctx, 1)
	fmt.Println("replayed by:", ds[0].Message.Headers.Get("wary-replayed-by"))
	r, _ = in.Handle(ctx, ds[0], func(context.Context, *sql.Tx, *broker.Delivery) error { return nil })
	fmt.Println("handled:", r)
	n, _ := a.CountParked(ctx, "", idem.ParkedFilter{})
	fmt.Println("parked now:", n)
	// Output:
	// handled: parked
	// parked: billing order-1/paid (order-1 unknown)
	// replayed: 1
	// replayed by: alice: order-1 unknown
	// handled: applied
	// parked now: 0
}
