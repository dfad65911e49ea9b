package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/idemtest"
	"github.com/wary-go/wary/idem/sqlite"
)

type payment struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// TestTypedInbox: through an inbox, a typed handler applies the decoded
// payments; an undecodable one is dead-lettered with its reason on a broker
// that dead-letters, and parked with it on one that cannot, never retried,
// and never applied.
func TestTypedInbox(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, "CREATE TABLE paid (id TEXT PRIMARY KEY, amount INTEGER)"); err != nil {
		t.Fatal(err)
	}
	pay := idem.Typed(nil, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery, p payment) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO paid VALUES (?, ?)", p.Order, p.Amount)
		return err
	})

	b := memory.New(nil)
	defer b.Close()
	if err := b.CreateTopic("payments", &memory.TopicConfig{Profile: memory.Queue}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("payments", "ledger"); err != nil {
		t.Fatal(err)
	}
	topic, _ := b.OpenTopic("payments", nil)
	defer topic.Close()
	good, _ := broker.NewMessage(nil, "p-1", "o-1", payment{"o-1", 30})
	bad := &broker.Message{ID: "p-2", Key: "o-2", Body: []byte(`{"order": 7}`)} // order is not a string
	if err := topic.Publish(ctx, good, bad); err != nil {
		t.Fatal(err)
	}
	sub, _ := b.OpenSubscription("payments", "ledger", nil)
	defer sub.Close()
	in, err := idem.NewInbox(st, "ledger", sub.Capabilities(), idemtest.Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]idem.Result{}
	for len(results) < 2 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ds, err := sub.Receive(wctx, 2)
		cancel()
		if err != nil {
			t.Fatalf("receive: %v (results %v)", err, results)
		}
		for _, d := range ds {
			r, _ := in.Handle(ctx, d, pay)
			results[d.Message.ID] = r
		}
	}
	if results["p-1"] != idem.ResultApplied || results["p-2"] != idem.ResultDeadLettered {
		t.Fatalf("results %v, want p-1 applied, p-2 dead-lettered", results)
	}
	dlq, _ := b.OpenDeadLetters("payments", "ledger", nil)
	defer dlq.Close()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ds, err := dlq.Receive(wctx, 1)
	cancel()
	if err != nil || len(ds) != 1 || !strings.Contains(ds[0].Message.Headers[broker.HeaderDeadLetterReason], "undecodable") {
		t.Fatalf("dead letters %v, %v; want p-2 with an undecodable reason", ds, err)
	}
	var n int
	if err := st.DB().QueryRowContext(ctx, "SELECT count(*) FROM paid").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d payments applied (%v), want 1", n, err)
	}

	// A broker without dead letters: the message is parked with the
	// reason, at once.
	noDLQ, err := idem.NewInbox(st, "ledger-2", broker.SubscriptionCapabilities{RedeliveryHorizon: time.Hour}, idemtest.Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	r, err := noDLQ.Handle(ctx, broker.NewDetachedDelivery(bad, 1), pay)
	if r != idem.ResultParked {
		t.Fatalf("without dead letters: %v, %v; want parked", r, err)
	}
	parked, err := noDLQ.Parked(ctx, idem.ParkedFilter{})
	if err != nil || len(parked) != 1 || !strings.Contains(parked[0].Reason, "undecodable") {
		t.Fatalf("parked %+v, %v; want p-2 with an undecodable reason", parked, err)
	}
}
