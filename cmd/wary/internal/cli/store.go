package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/wary-go/wary/idem/admin"
	"github.com/wary-go/wary/idem/mysql"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/idem/sqlite"
	"github.com/wary-go/wary/redact"
)

// storeFlags select the database of the store.
type storeFlags struct {
	postgres, sqlite, mysql, schema, prefix string
}

func (f *storeFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.postgres, "postgres", "", "PostgreSQL URL of the store (default $"+EnvPostgres+")")
	c.Flags().StringVar(&f.sqlite, "sqlite", "", "SQLite file of the store (instead of --postgres)")
	c.Flags().StringVar(&f.mysql, "mysql", "", "MySQL or MariaDB DSN of the store, as go-sql-driver/mysql reads it: user:password@tcp(host:3306)/db (instead of --postgres)")
	c.Flags().StringVar(&f.schema, "schema", "", "schema of the store's tables (default: the search_path's first)")
	c.Flags().StringVar(&f.prefix, "prefix", "", "table prefix of the store (default wary_)")
}

// given reports whether a store was named.
func (a *app) storeGiven(f *storeFlags) bool {
	return f.sqlite != "" || f.mysql != "" || a.envDefault(f.postgres, EnvPostgres) != ""
}

// db is an opened store: the operator's view of it (idem/admin), and
// how to close what the flags opened.
type db struct {
	*admin.Admin
	close func()
}

// openStore opens the store the flags name, without migrating it.
func (a *app) openStore(ctx context.Context, f *storeFlags) (*db, error) {
	pgURL := a.envDefault(f.postgres, EnvPostgres)
	opts := &admin.Options{Schema: f.schema, Prefix: f.prefix}
	switch {
	case (f.sqlite != "") && (f.postgres != "" || f.mysql != "") || f.mysql != "" && f.postgres != "":
		return nil, errors.New("give one of --postgres, --mysql and --sqlite")
	case f.mysql != "":
		s, err := mysql.Open(ctx, f.mysql, &mysql.Options{Schema: f.schema, Prefix: f.prefix, SkipMigrate: true, Logger: slog.New(slog.DiscardHandler)}) // the isolation note is for programs
		if err != nil {
			return nil, fmt.Errorf("MySQL %s: %s", redact.String(f.mysql), redactErr(err))
		}
		ad, err := admin.New(ctx, s, opts)
		if err != nil {
			s.Close()
			return nil, noStore(err, "mysql.Options", "mysql.Open")
		}
		return &db{Admin: ad, close: func() { s.Close() }}, nil
	case f.sqlite != "":
		if _, err := os.Stat(f.sqlite); err != nil {
			return nil, fmt.Errorf("--sqlite: %w", err)
		}
		s, err := sqlite.Open(ctx, f.sqlite, &sqlite.Options{Schema: f.schema, Prefix: f.prefix, SkipMigrate: true})
		if err != nil {
			return nil, fmt.Errorf("open SQLite store %s: %w", f.sqlite, err)
		}
		ad, err := admin.New(ctx, s, opts)
		if err != nil {
			s.Close()
			return nil, noStore(err, "sqlite.Options", "sqlite.Open")
		}
		return &db{Admin: ad, close: func() { s.Close() }}, nil
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
		if err != nil {
			pool.Close()
			return nil, err
		}
		ad, err := admin.New(ctx, s, opts)
		if err != nil {
			pool.Close()
			return nil, noStore(err, "postgres.Options", "postgres.New")
		}
		return &db{Admin: ad, close: pool.Close}, nil
	}
	return nil, fmt.Errorf("name the store: --postgres URL (or $%s), --mysql DSN or --sqlite FILE", EnvPostgres)
}

// noStore says how to fix a store that is not where the flags say: a
// wrong --schema or --prefix would otherwise surface as a bare "relation
// does not exist" from the first query.
func noStore(err error, options, open string) error {
	if errors.Is(err, admin.ErrNoStore) {
		return fmt.Errorf("%s; pass the --schema and --prefix your program gives %s, "+
			"or start the program once so that %s creates the tables", err, options, open)
	}
	return errors.New(redactErr(err))
}
