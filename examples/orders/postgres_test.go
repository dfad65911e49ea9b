//go:build postgres

package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/internal/servicetest"
	"github.com/wary-go/wary/testkit"
)

func TestPostgres(t *testing.T) {
	run(t, Config{Postgres: postgresURL(t)})
}

// TestBillingHandlerPostgres is TestBillingHandler on PostgreSQL: the
// billing consumer's PostgreSQL handler through the test kit, in a fresh
// schema of the test database.
func TestBillingHandlerPostgres(t *testing.T) {
	store := testkit.Postgres(t, postgresURL(t))
	for _, q := range billingTables {
		if _, err := store.Pool().Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	payments, err := keys.New(store, keys.Contract{Provider: "payments", Retention: 24 * time.Hour, Replays: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testBilling(t, testkit.New(t, store, &testkit.Options{Versions: billingVersions}), payments, billingPostgres(payments))
}

// postgresURL returns the local test database's URL (WARY_POSTGRES_URL),
// or skips t (fails it, with WARY_REQUIRE_SERVICES=1) when it cannot be
// reached.
func postgresURL(t *testing.T) string {
	t.Helper()
	return servicetest.URL(t, "WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	})
}
