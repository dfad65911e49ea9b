// Command setup makes the schema addcost that the add-cost pgbench
// scripts run in (see ../README.md): a store's tables (postgres.New
// migrates them), the producers' domain table (orders) and a plain table
// of the outbox's columns with a primary key only (plain). It drops the
// schema first. PostgreSQL at WARY_POSTGRES_URL, or
// postgres://postgres@127.0.0.1:5432/test.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/postgres"
)

func main() {
	if err := setup(context.Background(), cmp.Or(os.Getenv("WARY_POSTGRES_URL"), "postgres://postgres@127.0.0.1:5432/test")); err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
}

func setup(ctx context.Context, url string) error {
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `DROP SCHEMA IF EXISTS addcost CASCADE; CREATE SCHEMA addcost;
		CREATE TABLE addcost.orders (id text PRIMARY KEY, payload text NOT NULL);
		CREATE TABLE addcost.plain (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, message_id text, aggregate_id text, payload bytea, created_at timestamptz)`); err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = "addcost"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = postgres.New(ctx, pool, nil)
	return err
}
