package testkit_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/testkit"
)

// deposit is the handler under test, for the PostgreSQL store (its
// transactions are pgx.Tx): each event adds its amount to the account and
// records its effect by message ID, both through tx.
func deposit(ctx context.Context, tx pgx.Tx, d *broker.Delivery) error {
	ev, err := idem.ParseEvent(d.Message) // the inbox checked the version first
	if err != nil {
		return err
	}
	amount, err := strconv.Atoi(string(d.Message.Body))
	if err != nil {
		return broker.Permanent(err)
	}
	// Version 1 opens the account (the version check found no row); later
	// versions find it, its version already set by the check.
	if _, err := tx.Exec(ctx, `INSERT INTO accounts (id, version, balance) VALUES ($1, 1, $2)
		ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + excluded.balance`, ev.AggregateID, amount); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO deposits (message_id) VALUES ($1)`, d.Message.ID)
	return err
}

func TestDeposit(t *testing.T) {
	store := testkit.Postgres(t, postgresURL(t)) // a fresh schema, dropped when the test ends
	for _, q := range []string{
		`CREATE TABLE accounts (id TEXT PRIMARY KEY, version BIGINT NOT NULL, balance BIGINT NOT NULL)`,
		`CREATE TABLE deposits (message_id TEXT NOT NULL)`,
	} {
		if _, err := store.Pool().Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	kit := testkit.New(t, store, &testkit.Options{
		Versions: idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"},
	})
	rep := kit.Run(deposit,
		testkit.Event{AggregateID: "acct-1", Version: 1, Type: "opened", Body: []byte("100")},
		testkit.Event{AggregateID: "acct-1", Version: 2, Type: "deposited", Body: []byte("5")},
		testkit.Event{AggregateID: "acct-2", Version: 1, Type: "opened", Body: []byte("7")})
	t.Log(rep) // every event delivered twice, reordered, a rollback after the handler, a lost ack

	kit.AssertOnce(t, kit.CountRows(`SELECT message_id FROM deposits`))
	kit.AssertRows(t, `SELECT id, version, balance FROM accounts ORDER BY id`, "acct-1 2 105", "acct-2 1 7")
}

// postgresURL is the test database: $WARY_POSTGRES_URL, or a local server.
// It skips the test when there is none, or fails it with
// WARY_REQUIRE_SERVICES=1 (as CI runs).
func postgresURL(t *testing.T) string {
	t.Helper()
	url, set := os.LookupEnv("WARY_POSTGRES_URL")
	if !set {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	switch {
	case err == nil:
		conn.Close(ctx)
	case set || os.Getenv("WARY_REQUIRE_SERVICES") == "1":
		t.Fatalf("PostgreSQL unreachable: %v", err)
	default:
		t.Skipf("PostgreSQL unreachable at %s (set WARY_POSTGRES_URL, or WARY_REQUIRE_SERVICES=1 to fail): %v", url, err)
	}
	return url
}
