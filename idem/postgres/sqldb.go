package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
)

// ErrNeedsPgx matches OpenDB's refusals: a *sql.DB whose driver is not
// pgx's (github.com/jackc/pgx/v5/stdlib), or an option that only the
// store on a pgx pool (New) has: Options.InboxSlice, Options.OutboxSlice
// and SourceOptions.Stream. Those run on a Store from New on the same
// database and tables, beside the SQLStore (see SQLStore).
var ErrNeedsPgx = errors.New("idem/postgres: needs the store on a pgx pool")

// SQLStore is the PostgreSQL store on a *sql.DB opened with pgx's
// database/sql driver (github.com/jackc/pgx/v5/stdlib: sql.Open("pgx",
// url), stdlib.OpenDB, stdlib.OpenDBFromPool, or the *sql.DB under an
// ORM such as GORM's): its transactions are *sql.Tx, so an inbox on it
// (idem.NewInbox[*sql.Tx]) hands its handlers the *sql.Tx in which the
// delivery was claimed, for the program's database/sql code or ORM to
// write in, and outbox.New adds rows in the program's own *sql.Tx. Hand
// it to idem.NewInbox, outbox.New, outbox.NewRelay, keys.New and
// admin.New as a Store. It is safe for concurrent use.
//
// It is the Store's schema, migrations and SQL: the same tables, which a
// Store from New on the same database may share (the relay streaming the
// outbox, say, while the inbox runs on the SQLStore). What differs:
//
//   - A claim costs one round trip more than on a Store: database/sql
//     sends BEGIN alone, and the claim follows it (BEGIN, the claim, the
//     handler's statements, COMMIT: four round trips for a handler of one
//     statement, against three on a Store, where the claim travels with
//     BEGIN). A relay's batch is claimed and marked in statements of their
//     own, not pipelines.
//   - Options.InboxSlice, Options.OutboxSlice and SourceOptions.Stream are
//     refused (ErrNeedsPgx): their rotations and the stream use pgx's
//     protocol (batches, the replication connection). An SQLStore on an
//     inbox made sliced by a Store refuses to open.
//   - A relay's LISTEN connection is a pgx connection of its own, made
//     with the configuration of the *sql.DB's connections (read once, by
//     OpenDB, through sql.Conn.Raw).
type SQLStore struct{ d *sqlDriver }

// sqlDriver is what idem's packages call of an SQLStore (behind
// SQLStore.Driver): sqlcore's SQL over database/sql, and what the store on
// a pool does alike (shared).
type sqlDriver struct {
	*sqlcore.Core[*sql.Tx]
	*sqlcore.Outbox[*sql.Tx]
	*shared
	db  *sql.DB
	src SourceOptions
}

// Driver makes s an idem.Store: it returns the store's handle, for idem's
// constructors. Applications do not call it.
func (s *SQLStore) Driver() seam.Driver[*sql.Tx] { return seam.NewDriver[*sql.Tx](s.d) }

// OpenDB returns a store on db, whose driver must be pgx's
// (github.com/jackc/pgx/v5/stdlib), and, unless opts.SkipMigrate, creates
// or migrates its tables as New does. It fails with an error matching
// ErrNeedsPgx for another driver, and for the options only New has (see
// SQLStore).
func OpenDB(ctx context.Context, db *sql.DB, opts *Options) (*SQLStore, error) {
	if db == nil {
		return nil, errors.New("idem/postgres: nil db")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	switch {
	case o.InboxSlice > 0:
		return nil, fmt.Errorf("%w: Options.InboxSlice", ErrNeedsPgx)
	case o.OutboxSlice > 0:
		return nil, fmt.Errorf("%w: Options.OutboxSlice", ErrNeedsPgx)
	case o.Source.Stream:
		return nil, fmt.Errorf("%w: SourceOptions.Stream", ErrNeedsPgx)
	}
	cfg, err := connConfig(ctx, db)
	if err != nil {
		return nil, err
	}
	core, err := sqlcore.New[*sql.Tx](sqlcore.StdBackend{DB: db, Classify: classify}, dialect, o.Schema, o.Prefix)
	if err != nil {
		return nil, err
	}
	auto := sqlcore.StdQuerier{On: db, Classify: classify}
	box := sqlcore.NewOutbox(core, outboxDialect(auto))
	s := &SQLStore{d: &sqlDriver{Core: core, Outbox: box, shared: newShared(auto, box, core, cfg.Copy), db: db, src: o.Source}}
	if !o.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// connConfig returns the configuration of db's connections, which must be
// pgx's.
func connConfig(ctx context.Context, db *sql.DB) (*pgx.ConnConfig, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("idem/postgres: %w", err)
	}
	defer c.Close()
	var cfg *pgx.ConnConfig
	err = c.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: the *sql.DB's driver connection is a %T, not pgx's (github.com/jackc/pgx/v5/stdlib)", ErrNeedsPgx, dc)
		}
		cfg = pc.Conn().Config().Copy()
		// pgx set that connection's own notification buffer here: a
		// connection made with cfg must buffer its own.
		cfg.OnNotification = nil
		return nil
	})
	return cfg, err
}

// Migrate creates or upgrades the store's tables from the embedded,
// versioned SQL files, as Store.Migrate does; it refuses an inbox that a
// Store made sliced (Options.InboxSlice).
func (s *SQLStore) Migrate(ctx context.Context) error {
	if err := s.d.Core.Migrate(ctx, migrations, "sql"); err != nil {
		return err
	}
	var sliced bool
	if err := s.d.auto.QueryRow(ctx, slicedQuery, s.d.Name("inbox"), slicedCheck).Scan(&sliced); err != nil {
		return fmt.Errorf("idem/postgres: inbox layout: %w", err)
	}
	if sliced {
		return fmt.Errorf("%w: the inbox %s is sliced (Options.InboxSlice)", ErrNeedsPgx, s.d.Name("inbox"))
	}
	return nil
}

// DB returns the database.
func (s *SQLStore) DB() *sql.DB { return s.d.db }

// OutboxSource implements the relay's part (outbox's relayStore): claims
// from the table, as a Store's relay without SourceOptions.Stream.
func (s *sqlDriver) OutboxSource(_ context.Context, c seam.SourceConfig) (seam.Source[outbox.Row], error) {
	return pollSource(s.Outbox, s, s.src, c, s.pollGuard), nil
}

// CheckVersion is Store.CheckVersion in a *sql.Tx.
func (s *SQLStore) CheckVersion(ctx context.Context, tx *sql.Tx, t idem.VersionTable, id string, version int64) (idem.VersionCheck, error) {
	return s.d.CheckVersion(ctx, tx, t, id, version)
}

// Transition is Store.Transition in a *sql.Tx.
func (s *SQLStore) Transition(ctx context.Context, tx *sql.Tx, t idem.StateTable, id, to string, from ...string) (idem.TransitionCheck, error) {
	return s.d.Transition(ctx, tx, t, id, to, from...)
}
