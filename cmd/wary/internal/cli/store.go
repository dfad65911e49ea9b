package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/idem/sqlite"
	"github.com/wary-go/wary/idem/store"
	"github.com/wary-go/wary/redact"
)

// storeFlags select the database of the store.
type storeFlags struct {
	postgres, sqlite, schema, prefix string
}

func (f *storeFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.postgres, "postgres", "", "PostgreSQL URL of the store (default $"+EnvPostgres+")")
	c.Flags().StringVar(&f.sqlite, "sqlite", "", "SQLite file of the store (instead of --postgres)")
	c.Flags().StringVar(&f.schema, "schema", "", "schema of the store's tables (default: the search_path's first)")
	c.Flags().StringVar(&f.prefix, "prefix", "", "table prefix of the store (default wary_)")
}

// given reports whether a store was named.
func (a *app) storeGiven(f *storeFlags) bool {
	return f.sqlite != "" || a.envDefault(f.postgres, EnvPostgres) != ""
}

// db is a store with its transaction type hidden.
type db interface {
	store.OutboxAdmin
	ListParked(ctx context.Context, consumer string, f store.ParkedFilter) ([]store.Parked, error)
	CountParked(ctx context.Context, consumer string, f store.ParkedFilter) (int, error)
	DiscardParked(ctx context.Context, consumer string, f store.ParkedFilter) (int, error)
	ParkedConsumers(ctx context.Context) (map[string]int, error)
	ListEarly(ctx context.Context, consumer string, limit int) ([]store.EarlyAggregate, error)
	// unpark deletes ps from the park and forgets their inbox claims, calls
	// publish, and commits only if publish succeeded: a message is never
	// both gone from the park and not sent.
	unpark(ctx context.Context, consumer string, ps []store.Parked, publish func(context.Context) error) error
	ListKeys(ctx context.Context, f store.KeyFilter) ([]store.KeyRecord, error)
	// pgPool is the PostgreSQL store's pool (nil for SQLite).
	pgPool() *pgxpool.Pool
	// streamStatus is the outbox stream's slot, if the store streams and
	// the slot exists.
	streamStatus(ctx context.Context) (store.OutboxStreamStatus, bool, error)
	close()
}

type sqlDB[Tx any] struct {
	store.Driver[Tx]
	closeFn func()
	pool    *pgxpool.Pool
}

func (d sqlDB[Tx]) pgPool() *pgxpool.Pool { return d.pool }

func (d sqlDB[Tx]) close() { d.closeFn() }

func (d sqlDB[Tx]) streamStatus(ctx context.Context) (store.OutboxStreamStatus, bool, error) {
	s, ok := d.Driver.(store.StreamStatuser)
	if !ok {
		return store.OutboxStreamStatus{}, false, nil
	}
	st, err := s.OutboxStreamStatus(ctx)
	return st, err == nil && (st.Exists || st.Released > 0), err
}

func (d sqlDB[Tx]) unpark(ctx context.Context, consumer string, ps []store.Parked, publish func(context.Context) error) (err error) {
	tx, err := d.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = d.Rollback(context.WithoutCancel(ctx), tx)
		}
	}()
	for _, p := range ps {
		ok, err := d.DeleteParked(ctx, tx, consumer, p.ID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("parked message %d (%s) is gone: replayed or discarded meanwhile", p.ID, p.MessageID)
		}
		if _, err := d.Unclaim(ctx, tx, consumer, p.MessageID); err != nil {
			return err
		}
	}
	if err := publish(ctx); err != nil {
		return err
	}
	return d.Commit(ctx, tx)
}

// openStore opens the store the flags name, without migrating it.
func (a *app) openStore(ctx context.Context, f *storeFlags) (db, error) {
	pgURL := a.envDefault(f.postgres, EnvPostgres)
	switch {
	case f.sqlite != "" && f.postgres != "":
		return nil, errors.New("give --postgres or --sqlite, not both")
	case f.sqlite != "":
		if _, err := os.Stat(f.sqlite); err != nil {
			return nil, fmt.Errorf("--sqlite: %w", err)
		}
		s, err := sqlite.Open(ctx, f.sqlite, &sqlite.Options{Schema: f.schema, Prefix: f.prefix, SkipMigrate: true})
		if err != nil {
			return nil, fmt.Errorf("open SQLite store %s: %w", f.sqlite, err)
		}
		return sqlDB[*sql.Tx]{Driver: s.Driver(), closeFn: func() { s.Close() }}, nil
	case pgURL != "":
		pool, err := pgxpool.New(ctx, pgURL)
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL %s: %s", redact.String(pgURL), redactErr(err))
		}
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("PostgreSQL %s: %s", redact.String(pgURL), redactErr(err))
		}
		s, err := postgres.New(ctx, pool, &postgres.Options{Schema: f.schema, Prefix: f.prefix, SkipMigrate: true})
		if err == nil {
			err = pgStoreExists(ctx, pool, f)
		}
		if err != nil {
			pool.Close()
			return nil, err
		}
		return sqlDB[pgx.Tx]{Driver: s.Driver(), closeFn: pool.Close, pool: pool}, nil
	}
	return nil, fmt.Errorf("name the store: --postgres URL (or $%s) or --sqlite FILE", EnvPostgres)
}

// pgStoreExists fails, naming the schema and the table it looked for and
// how to fix it, unless the store's tables are where the flags say: a
// wrong --schema or --prefix would otherwise surface as a bare
// "relation does not exist (SQLSTATE 42P01)" from the first query.
func pgStoreExists(ctx context.Context, pool *pgxpool.Pool, f *storeFlags) error {
	schema, prefix, err := pgNames(ctx, pool, f)
	if err != nil {
		return err
	}
	table := pgx.Identifier{schema, prefix + "migrations"}.Sanitize()
	var found bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&found); err != nil {
		return fmt.Errorf("PostgreSQL: look for %s: %s", table, redactErr(err))
	}
	if found {
		return nil
	}
	where := fmt.Sprintf("schema %q", schema)
	if f.schema == "" {
		where += " (the search_path's first; --schema names another)"
	}
	return fmt.Errorf("no wary store in %s with prefix %q: table %s does not exist; "+
		"pass the --schema and --prefix your program gives postgres.Options, "+
		"or start the program once so that postgres.New creates the tables", where, prefix, table)
}

// pgNames returns the schema and the table prefix of the store the flags
// name: the flags', or the search_path's first schema and the default
// prefix.
func pgNames(ctx context.Context, pool *pgxpool.Pool, f *storeFlags) (schema, prefix string, err error) {
	prefix = f.prefix
	if prefix == "" {
		prefix = postgres.DefaultPrefix
	}
	schema = f.schema
	if schema == "" {
		if err := pool.QueryRow(ctx, "SELECT coalesce(current_schema(), '')").Scan(&schema); err != nil {
			return "", "", fmt.Errorf("PostgreSQL: read the current schema: %s", redactErr(err))
		}
	}
	return schema, prefix, nil
}
