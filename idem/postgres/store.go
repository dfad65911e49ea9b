package postgres

import (
	"context"
	"embed"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/sqlcore"
)

//go:embed sql/*.sql
var migrations embed.FS

// Options configures a Store. Nil means defaults.
type Options struct {
	// Prefix is prepended to every table and index name the store creates
	// (default "wary_"). It must be a valid identifier (letters, digits,
	// underscores) short enough that every name fits in 63 bytes.
	Prefix string
	// NoPrefix uses no prefix at all (tables "inbox", "parked", ...).
	NoPrefix bool
	// Schema, if set, qualifies the store's tables (and is created if it
	// does not exist); by default they go to the first schema of the
	// connection's search_path.
	Schema string
	// SkipMigrate leaves the schema alone; call Migrate yourself.
	SkipMigrate bool
}

// DefaultPrefix is the default table prefix.
const DefaultPrefix = "wary_"

// Store is the PostgreSQL store: an idem.Store[pgx.Tx] on a pgxpool.Pool.
// It is safe for concurrent use.
type Store struct {
	*sqlcore.Core[pgx.Tx]
	*sqlcore.Outbox[pgx.Tx]
	pool *pgxpool.Pool
}

var _ idem.Store[pgx.Tx] = (*Store)(nil)
var _ idem.OutboxStore[pgx.Tx] = (*Store)(nil)
var _ idem.KeyStore[pgx.Tx] = (*Store)(nil)

// New returns a store on pool and, unless opts.SkipMigrate, creates or
// migrates its tables. Migrations are serialised across processes with an
// advisory lock.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("idem/postgres: nil pool")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" && !o.NoPrefix {
		o.Prefix = DefaultPrefix
	}
	core, err := sqlcore.New[pgx.Tx](backend{pool}, dialect, o.Schema, o.Prefix)
	if err != nil {
		return nil, err
	}
	s := &Store{Core: core, Outbox: sqlcore.NewOutbox(core, outboxDialect), pool: pool}
	if !o.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Migrate creates or upgrades the store's tables from the embedded,
// versioned SQL files; it is safe to call concurrently and repeatedly.
func (s *Store) Migrate(ctx context.Context) error {
	return s.Core.Migrate(ctx, migrations, "sql")
}

// Pool returns the pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

var dialect = sqlcore.Dialect{
	Time: func(t time.Time) any { return t },
	Quote: func(schema, name string) string {
		if schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{schema, name}.Sanitize()
	},
	IsNoRows:     func(err error) bool { return errors.Is(err, pgx.ErrNoRows) },
	Lock:         "SELECT pg_advisory_xact_lock($1)",
	CreateSchema: "CREATE SCHEMA IF NOT EXISTS %s",
}

type backend struct{ pool *pgxpool.Pool }

func (b backend) Begin(ctx context.Context) (pgx.Tx, error) { return b.pool.Begin(ctx) }
func (backend) Commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }
func (backend) Rollback(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}
func (backend) Q(tx pgx.Tx) sqlcore.Querier { return querier{tx} }

type querier struct{ tx pgx.Tx }

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) sqlcore.Row {
	return q.tx.QueryRow(ctx, sql, args...)
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlcore.Rows, error) {
	return q.tx.Query(ctx, sql, args...)
}
