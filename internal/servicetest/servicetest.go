// Package servicetest finds the local services (PostgreSQL, RabbitMQ)
// that tests run against, and skips or fails a test when one cannot be
// reached.
package servicetest

import (
	"context"
	"flag"
	"log"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// URL returns the URL in the environment variable env, or def when env is
// unset. It skips t when the service cannot be reached (reach fails within
// 5 seconds), unless env is set or WARY_REQUIRE_SERVICES=1, which fail t
// instead.
func URL(t testing.TB, env, def string, reach func(ctx context.Context, url string) error) string {
	t.Helper()
	url, set := os.LookupEnv(env)
	if !set {
		url = def
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := reach(ctx, url); err != nil {
		if set || os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatalf("%s unreachable: %v", env, err)
		}
		t.Skipf("unreachable at %s (set %s, or WARY_REQUIRE_SERVICES=1 to fail): %v", def, env, err)
	}
	return url
}

// Examples readies a package's runnable examples that need the service in
// env (def when unset), from TestMain after flag.Parse: an example cannot
// skip itself, so when the service cannot be reached (reach fails within
// 5 seconds) they are skipped here (^Example joins -test.skip), as URL
// skips a test, unless env is set or WARY_REQUIRE_SERVICES=1 (then they
// run and fail). When env is unset and the service answers at def, env is
// set to def for the examples to read.
func Examples(env, def string, reach func(ctx context.Context, url string) error) {
	if _, set := os.LookupEnv(env); set {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if os.Getenv("WARY_REQUIRE_SERVICES") == "1" || reach(ctx, def) == nil {
		_ = os.Setenv(env, def)
		return
	}
	skip := "^Example"
	if f := flag.Lookup("test.skip"); f != nil {
		if s := f.Value.String(); s != "" {
			skip = s + "|" + skip
		}
	}
	_ = flag.Set("test.skip", skip)
}

// PostgresURL is the local server tests and examples use when
// WARY_POSTGRES_URL is unset.
const PostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresExamples is Examples for the PostgreSQL server at
// WARY_POSTGRES_URL (PostgresURL when unset).
func PostgresExamples() {
	Examples("WARY_POSTGRES_URL", PostgresURL, func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	})
}

// ExamplePool returns a pool on the server at WARY_POSTGRES_URL whose
// connections search the schema name (which the example's store creates),
// and a function that drops the schema and closes the pool. It exits the
// program if the URL is invalid, as an example's setup does.
func ExamplePool(ctx context.Context, name string) (*pgxpool.Pool, func()) {
	cfg, err := pgxpool.ParseConfig(os.Getenv("WARY_POSTGRES_URL"))
	if err != nil {
		log.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = name
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	return pool, func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		pool.Close()
	}
}
