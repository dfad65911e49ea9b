// Package pgexample readies the runnable examples of idem's packages that
// run on PostgreSQL: a TestMain skips them when the server cannot be
// reached (Ready), and an example's setup gets a pool searching a schema
// of its own (Pool). It is test support of the root module's packages
// only: servicetest, which the driver modules' tests import too, stays
// free of pgx.
package pgexample

import (
	"context"
	"flag"
	"log"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/internal/servicetest"
)

// URL is the local server the examples use when WARY_POSTGRES_URL is
// unset.
const URL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Main is the TestMain of a package whose examples run on PostgreSQL:
// it readies them (Ready) and runs the package's tests and examples. The
// package's other tests load no other store, since a PostgreSQL user's go
// mod tidy loads them.
func Main(m *testing.M) {
	flag.Parse()
	Ready()
	os.Exit(m.Run())
}

// Ready is servicetest.Examples for the PostgreSQL server at
// WARY_POSTGRES_URL (URL when unset), from TestMain after flag.Parse.
func Ready() {
	servicetest.Examples("WARY_POSTGRES_URL", URL, func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	})
}

// Pool returns a pool on the server at WARY_POSTGRES_URL whose
// connections search the schema name (which the example's store creates),
// and a function that drops the schema and closes the pool. It exits the
// program if the URL is invalid, as an example's setup does.
func Pool(ctx context.Context, name string) (*pgxpool.Pool, func()) {
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
