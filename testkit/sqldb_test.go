package testkit_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/testkit"
)

// depositSQL is deposit (postgres_test.go, docs/testing.md's) for the
// store through database/sql, whose transactions are *sql.Tx.
func depositSQL(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
	ev, err := idem.ParseEvent(d.Message)
	if err != nil {
		return err
	}
	amount, err := strconv.Atoi(string(d.Message.Body))
	if err != nil {
		return broker.Permanent(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (id, version, balance) VALUES ($1, 1, $2)
		ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + excluded.balance`, ev.AggregateID, amount); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO deposits (message_id) VALUES ($1)`, d.Message.ID)
	return err
}

// TestDepositSQL is TestDeposit through database/sql: the kit on a
// *postgres.SQLStore (a *sql.DB of pgx's stdlib driver on the fresh
// schema's pool), the handler on *sql.Tx; the kit reads the rows as it
// does through the pool.
func TestDepositSQL(t *testing.T) {
	pg := testkit.Postgres(t, postgresURL(t))
	for _, q := range []string{
		`CREATE TABLE accounts (id TEXT PRIMARY KEY, version BIGINT NOT NULL, balance BIGINT NOT NULL)`,
		`CREATE TABLE deposits (message_id TEXT NOT NULL)`,
	} {
		if _, err := pg.Pool().Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	db := stdlib.OpenDBFromPool(pg.Pool())
	t.Cleanup(func() { _ = db.Close() })
	store, err := postgres.OpenDB(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	kit := testkit.New(t, store, &testkit.Options{
		Versions: idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"},
	})
	rep := kit.Run(depositSQL,
		testkit.Event{AggregateID: "acct-1", Version: 1, Type: "opened", Body: []byte("100")},
		testkit.Event{AggregateID: "acct-1", Version: 2, Type: "deposited", Body: []byte("5")},
		testkit.Event{AggregateID: "acct-2", Version: 1, Type: "opened", Body: []byte("7")})
	t.Log(rep)

	kit.AssertOnce(t, kit.CountRows(`SELECT message_id FROM deposits`))
	kit.AssertRows(t, `SELECT id, version, balance FROM accounts ORDER BY id`, "acct-1 2 105", "acct-2 1 7")
}
