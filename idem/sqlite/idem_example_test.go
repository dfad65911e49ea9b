package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
)

// setup opens a SQLite store in a temporary directory, a memory broker
// topic and a subscription on it.
func setup(ctx context.Context) (*sqlite.Store, *broker.Topic, *broker.Subscription, func()) {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	b := memory.New(nil)
	_ = b.CreateTopic("orders", nil)
	_ = b.CreateSubscription("orders", "billing")
	topic, _ := b.OpenTopic("orders", nil)
	sub, _ := b.OpenSubscription("orders", "billing", nil)
	return st, topic, sub, func() {
		sub.Close()
		topic.Close()
		st.Close()
		os.RemoveAll(dir)
	}
}

func Example_inbox() {
	ctx := context.Background()
	st, topic, sub, cleanup := setup(ctx)
	defer cleanup()
	if _, err := st.DB().Exec(`CREATE TABLE invoices (order_id TEXT NOT NULL, amount INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	inbox, err := idem.NewInbox(st, "billing", sub.Capabilities(), nil)
	if err != nil {
		log.Fatal(err)
	}
	// The handler writes through the transaction that claims the message.
	invoice := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO invoices (order_id, amount) VALUES (?, 100)`, string(d.Message.Body))
		return err
	}

	// A producer retry publishes the same message twice.
	msg := &broker.Message{ID: "order-1-placed", Body: []byte("order-1")}
	_ = topic.Publish(ctx, msg, msg)
	for range 2 {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		r, err := inbox.Handle(ctx, ds[0], invoice)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ds[0].Message.ID, r)
	}
	var n int
	_ = st.DB().QueryRow(`SELECT count(*) FROM invoices`).Scan(&n)
	fmt.Printf("invoices: %d\n", n)
	// Output:
	// order-1-placed applied
	// order-1-placed duplicate
	// invoices: 1
}

func Example_inboxVersioned() {
	ctx := context.Background()
	st, topic, sub, cleanup := setup(ctx)
	defer cleanup()
	_, _ = st.DB().Exec(`CREATE TABLE accounts (id TEXT PRIMARY KEY, version INTEGER NOT NULL, balance INTEGER NOT NULL)`)

	// Each event's version is checked against the accounts table before
	// the handler runs.
	inbox, err := idem.NewInbox(st, "ledger", sub.Capabilities(), &idem.Options{
		Versions:  idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"},
		Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)},
	})
	if err != nil {
		log.Fatal(err)
	}
	// apply runs for the next version of an aggregate only.
	apply := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		ev, err := idem.ParseEvent(d.Message)
		if err != nil {
			return err
		}
		if ev.Version == 1 { // the event that creates the aggregate
			_, err = tx.ExecContext(ctx, `INSERT INTO accounts (id, version, balance) VALUES (?, 1, 0)`, ev.AggregateID)
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 10 WHERE id = ?`, ev.AggregateID)
		return err
	}

	event := func(version int64) *broker.Message {
		ev := idem.Event{AggregateID: "acct-1", Version: version, Type: "deposit"}
		return &broker.Message{ID: fmt.Sprintf("acct-1-v%d", version), Headers: ev.Headers()}
	}
	deliver := func(m *broker.Message) {
		_ = topic.Publish(ctx, m)
		ds, _ := sub.Receive(ctx, 1)
		r, _ := inbox.Handle(ctx, ds[0], apply)
		fmt.Println(ds[0].Message.ID, r)
	}
	// v1, then v3 before v2: a gap, so v3 is held in the store as an
	// early event and acknowledged; v2 is applied, and v3 after it in the
	// same transaction.
	deliver(event(1))
	deliver(event(3))
	deliver(event(2))
	// v1 again under a new ID, as a producer replaying its log would send
	// it: stale, acknowledged, not applied.
	deliver(&broker.Message{ID: "replayed", Headers: event(1).Headers})
	var version, balance int
	_ = st.DB().QueryRow(`SELECT version, balance FROM accounts WHERE id = 'acct-1'`).Scan(&version, &balance)
	fmt.Printf("version %d, balance %d, early events applied %d\n", version, balance, inbox.Stats().EarlyApplied)
	// Output:
	// acct-1-v1 applied
	// acct-1-v3 early
	// acct-1-v2 applied
	// replayed stale
	// version 3, balance 20, early events applied 1
}

func ExampleStore_Transition() {
	ctx := context.Background()
	st, _, _, cleanup := setup(ctx)
	defer cleanup()
	_, _ = st.DB().Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL);
		INSERT INTO orders VALUES ('o-1', 'pending'), ('o-2', 'shipped')`)
	orders := idem.StateTable{Table: "orders", IDColumn: "id", StateColumn: "status"}

	// Inside an inbox handler, with its transaction: cancel only while
	// pending (or already cancelled).
	for _, id := range []string{"o-1", "o-1", "o-2"} {
		tx, _ := st.DB().BeginTx(ctx, nil)
		c, err := st.Transition(ctx, tx, orders, id, "cancelled", "pending", "cancelled")
		if err != nil {
			log.Fatal(err)
		}
		_ = tx.Commit()
		fmt.Printf("%s: %s (state %s)\n", id, c.Result, c.State)
	}
	// Output:
	// o-1: applied (state cancelled)
	// o-1: already in target state (state cancelled)
	// o-2: invalid transition (state shipped)
}
