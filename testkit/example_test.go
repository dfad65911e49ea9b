package testkit_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/testkit"
)

// applyDeposit is the handler under test: each event adds its amount to
// the account; each effect is recorded by message ID.
func applyDeposit(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
	ev, err := idem.ParseEvent(d.Message) // the kit's inbox checked the version
	if err != nil {
		return err
	}
	amount, err := strconv.Atoi(string(d.Message.Body))
	if err != nil {
		return broker.Permanent(err)
	}
	// Version 1 opens the account (the version check found no row); later
	// versions find it, and the check has set its version already.
	if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (id, version, balance) VALUES (?, 1, ?)
		ON CONFLICT (id) DO UPDATE SET balance = balance + excluded.balance`, ev.AggregateID, amount); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO ledger_effects (message_id) VALUES (?)`, d.Message.ID)
	return err
}

// testLedger is a test of yours, on SQLite (the zero-configuration store):
// in a _test.go file, call it from func TestLedger(t *testing.T). The kit
// delivers every event twice, in a shuffled order, rolls a transaction
// back after the handler and loses an ack after a commit; the assertions
// hold all the same. On PostgreSQL the test takes testkit.Postgres and a
// handler of pgx.Tx (postgres_test.go, shown in docs/testing.md).
func testLedger(t *testing.T) {
	store := testkit.SQLite(t) // a fresh database in t.TempDir()
	for _, q := range []string{
		`CREATE TABLE accounts (id TEXT PRIMARY KEY, version INTEGER NOT NULL, balance INTEGER NOT NULL)`,
		`CREATE TABLE ledger_effects (message_id TEXT NOT NULL)`,
	} {
		if _, err := store.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	kit := testkit.New(t, store, &testkit.Options{
		Versions: idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"},
	})
	rep := kit.Run(applyDeposit,
		testkit.Event{AggregateID: "acct-1", Version: 1, Type: "opened", Body: []byte("100")},
		testkit.Event{AggregateID: "acct-1", Version: 2, Type: "deposited", Body: []byte("5")},
		testkit.Event{AggregateID: "acct-2", Version: 1, Type: "opened", Body: []byte("7")})
	t.Log(rep)
	kit.AssertOnce(t, kit.CountRows(`SELECT message_id FROM ledger_effects`))
	kit.AssertRows(t, `SELECT id, version, balance FROM accounts ORDER BY id`, "acct-1 2 105", "acct-2 1 7")
}

// Example shows a test of a handler with the kit, on the SQLite store
// testkit.SQLite makes. A Kit needs the test's *testing.T, so this example
// is compiled, not run here; kit_test.go's TestExampleLedger runs
// testLedger, and TestDeposit the same test on PostgreSQL.
func Example() {
	_ = testLedger // func TestLedger(t *testing.T) { testLedger(t) }
}
