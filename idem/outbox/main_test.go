package outbox_test

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/internal/servicetest"
)

// TestMain readies the examples, which run on the PostgreSQL server at
// WARY_POSTGRES_URL (the default local server when unset; skipped when
// it cannot be reached, unless WARY_REQUIRE_SERVICES=1), so that the
// tests of this package, which a PostgreSQL user's go mod tidy loads,
// load no other store.
func TestMain(m *testing.M) {
	flag.Parse()
	servicetest.Examples("WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	})
	os.Exit(m.Run())
}
