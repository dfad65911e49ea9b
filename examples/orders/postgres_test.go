//go:build postgres

package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/internal/servicetest"
)

func TestPostgres(t *testing.T) {
	url := servicetest.URL(t, "WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	})
	run(t, Config{Postgres: url})
}
