package testkit_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/internal/mysqltest"
	"github.com/wary-go/wary/testkit"
)

// depositMySQL is deposit for the MySQL store (its transactions are
// *sql.Tx).
func depositMySQL(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
	ev, err := idem.ParseEvent(d.Message)
	if err != nil {
		return err
	}
	amount, err := strconv.Atoi(string(d.Message.Body))
	if err != nil {
		return broker.Permanent(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (id, version, balance) VALUES (?, 1, ?)
		ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance)`, ev.AggregateID, amount); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO deposits (message_id) VALUES (?)`, d.Message.ID)
	return err
}

func TestDepositMySQL(t *testing.T) {
	store := testkit.MySQL(t, mysqltest.Server(t)) // a fresh database, dropped when the test ends
	for _, q := range []string{
		`CREATE TABLE accounts (id VARCHAR(64) PRIMARY KEY, version BIGINT NOT NULL, balance BIGINT NOT NULL)`,
		`CREATE TABLE deposits (message_id VARCHAR(255) NOT NULL)`,
	} {
		if _, err := store.DB().ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	kit := testkit.New(t, store, &testkit.Options{
		Versions: idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"},
	})
	rep := kit.Run(depositMySQL,
		testkit.Event{AggregateID: "acct-1", Version: 1, Type: "opened", Body: []byte("100")},
		testkit.Event{AggregateID: "acct-1", Version: 2, Type: "deposited", Body: []byte("5")},
		testkit.Event{AggregateID: "acct-2", Version: 1, Type: "opened", Body: []byte("7")})
	t.Log(rep)

	kit.AssertOnce(t, kit.CountRows(`SELECT message_id FROM deposits`))
	kit.AssertRows(t, `SELECT id, version, balance FROM accounts ORDER BY id`, "acct-1 2 105", "acct-2 1 7")
}
