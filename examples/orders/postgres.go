//go:build postgres

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/postgres"
)

// runPostgres runs the mission on the PostgreSQL database at rawURL.
// Built in with -tags postgres.
func runPostgres(ctx context.Context, w io.Writer, rawURL string, br *brokers) (Report, error) {
	s, err := openPostgres(ctx, rawURL)
	if err != nil {
		return Report{}, err
	}
	defer s.close()
	return mission(ctx, w, s, br)
}

// billingPostgres is the billing consumer's handler on PostgreSQL, as
// billingSQLite is on SQLite.
func billingPostgres(payments *keys.Caller[pgx.Tx]) idem.Handler[pgx.Tx] {
	return idem.Typed(nil, func(ctx context.Context, tx pgx.Tx, d *broker.Delivery, order OrderEvent) error {
		ev, err := idem.ParseEvent(d.Message) // the version check read it already, so it parses
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO billing_effects (message_id) VALUES ($1)`, d.Message.ID); err != nil {
			return err
		}
		status := strings.TrimPrefix(ev.Type, "order.")
		if ev.Version == 1 {
			_, err := tx.Exec(ctx, `INSERT INTO billing_orders (id, version, status) VALUES ($1, 1, $2)`, ev.AggregateID, status)
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE billing_orders SET status = $1 WHERE id = $2`, status, ev.AggregateID); err != nil {
			return err
		}
		if status == "confirmed" {
			key, charge := billingPayment(ev, order)
			_, err := payments.Stage(ctx, tx, key, charge)
			return err
		}
		return nil
	})
}

// openPostgres opens a store in a fresh schema of the database at
// rawURL, dropped at close.
func openPostgres(ctx context.Context, rawURL string) (*shop[pgx.Tx], error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	admin, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "wary_orders_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		admin.Close(ctx)
		return nil, err
	}
	drop := func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		admin.Close(context.WithoutCancel(ctx))
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, err
	}
	store, err := postgres.New(ctx, pool, nil)
	if err != nil {
		pool.Close()
		drop()
		return nil, err
	}
	host := cfg.ConnConfig.Host
	return &shop[pgx.Tx]{
		name:  fmt.Sprintf("PostgreSQL (%s:%d/%s, schema %s)", host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, schema),
		store: store,
		inTx: func(ctx context.Context, f func(tx pgx.Tx) error) error {
			return pgx.BeginFunc(ctx, pool, f)
		},
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		billing: billingPostgres,
		column: func(ctx context.Context, q string) ([]string, error) {
			rows, err := pool.Query(ctx, q)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[string])
		},
		close: func() { pool.Close(); drop() },
	}, nil
}
