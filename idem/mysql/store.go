package mysql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
)

//go:embed sql/*.sql
var migrations embed.FS

// Options configures a Store. Nil means defaults.
type Options struct {
	// Prefix is prepended to every table and index name the store creates
	// (default "wary_"). It must be a valid identifier (letters, digits,
	// underscores) short enough that every name fits in 63 bytes.
	Prefix string
	// NoPrefix uses no prefix at all.
	NoPrefix bool
	// Schema, if set, is the database (MySQL's schema) that holds the
	// store's tables, created by Migrate if missing; by default the
	// connection's current database.
	Schema string
	// SkipMigrate leaves the schema alone; call Migrate yourself.
	SkipMigrate bool
	// Source sets up the source the store's relays publish from (see
	// SourceOptions); Store.WithSource gives other settings on the same
	// tables.
	Source SourceOptions
	// Logger receives the start-up notes (the isolation level found);
	// nil: slog.Default().
	Logger *slog.Logger
	// TxConns, for Open only (New refuses it), is the most connections
	// the store's transaction pool has open at once (the inbox's
	// transactions, the relays' held claims, the keys'), all kept open
	// when idle; 0: no limit, and up to 32 kept open when idle. An idle
	// connection is closed after 5 minutes. The database's own pool (DB)
	// has database/sql's defaults: set its limits on DB.
	TxConns int

	// readLimit replaces max_allowed_packet as the largest outbox row a
	// claim reads (tests: export_test.go).
	readLimit int64
	// portable forces the statements' portable forms, which MySQL runs,
	// on a server that has RETURNING, and refuses any statement with
	// RETURNING, as MySQL would (tests: export_test.go).
	portable bool
}

// SourceOptions set up the source of the store's relays: each relay
// claims the heads of aggregates with FOR UPDATE SKIP LOCKED in a
// transaction held while it publishes them. The zero value means defaults.
type SourceOptions struct {
	// Pipeline is how many claimed batches a relay holds at once, each in
	// a transaction of its own on a connection of its own (default 2).
	Pipeline int
	// PerAggregate is the most rows of one aggregate one claim takes
	// (default 10); they are published one after the other.
	PerAggregate int
}

// check validates o and applies its defaults.
func (o *SourceOptions) check() error {
	c := check.Options{What: "mysql source options"}
	c.Count("Pipeline", o.Pipeline)
	c.Count("PerAggregate", o.PerAggregate)
	if err := c.Err(); err != nil {
		return err
	}
	if o.Pipeline < 1 {
		o.Pipeline = 2
	}
	if o.PerAggregate < 1 {
		o.PerAggregate = sqlcore.DefaultPerAggregate
	}
	return nil
}

// DefaultPrefix is the default table prefix.
const DefaultPrefix = "wary_"

// ErrConflict matches the errors of a transaction that failed only
// because of a concurrent one and may succeed if tried again at once:
// InnoDB's deadlock victim (error 1213) and a lock wait timeout (1205).
// The inbox tries such a transaction again itself, a few times, instead
// of nacking its deliveries; a program's own transactions can test for it
// with errors.Is.
var ErrConflict = errors.New("idem/mysql: transaction conflict, try again")

// ErrTooLarge matches the error of an outbox row larger than the server's
// max_allowed_packet: Add fails with it before anything is sent, and the
// adding transaction can go on without the row or roll back.
var ErrTooLarge = errors.New("idem/mysql: outbox row larger than max_allowed_packet")

// Store is the MySQL and MariaDB store on a *sql.DB opened with
// github.com/go-sql-driver/mysql: hand it to idem.NewInbox, outbox.New,
// outbox.NewRelay and keys.New. Handlers call CheckVersion and Transition
// on it inside the inbox transaction. It is safe for concurrent use.
type Store struct {
	core   *sqlcore.Core[*sql.Tx]
	outbox *sqlcore.Outbox[*sql.Tx]
	d      *driver
	db     *sql.DB
	be     *backend
	owned  bool
	// returning: the statements use RETURNING (see newDialect).
	returning bool
}

// driver is the store's implementation of what idem's packages call, with
// the shared SQL of sqlcore: the inbox's part (Core), the outbox's, the
// relay's and the keys' (sourced). sqlcore.Outbox's wake flag methods are
// PostgreSQL's; the store gives its polling source no Wake.
type driver struct {
	*sqlcore.Core[*sql.Tx]
	sourced
}

// sourced is the outbox with the store's source settings.
type sourced struct {
	*sqlcore.Outbox[*sql.Tx]
	src SourceOptions
	be  *backend
}

// OutboxSource implements the relay's part: claims with SKIP LOCKED.
func (o sourced) OutboxSource(_ context.Context, c seam.SourceConfig) (seam.Source[outbox.Row], error) {
	return o.PollSource(c, sqlcore.PollOptions{PerAggregate: o.src.PerAggregate, Pipeline: o.src.Pipeline}), nil
}

// AddOutbox implements the outbox's part: a row larger than the server's
// max_allowed_packet fails with ErrTooLarge before anything is sent, and
// the rows are added in groups whose statements fit in it (sqlcore's
// inserts take up to 100 rows each, which would not).
func (o sourced) AddOutbox(ctx context.Context, tx *sql.Tx, msgs []outbox.Message, at time.Time) ([]int64, error) {
	if err := o.be.fits(msgs); err != nil {
		return nil, err
	}
	var seqs []int64
	for len(msgs) > 0 {
		n := o.be.group(msgs)
		s, err := o.Outbox.AddOutbox(ctx, tx, msgs[:n], at)
		if err != nil {
			return nil, err
		}
		seqs = append(seqs, s...)
		msgs = msgs[n:]
	}
	return seqs, nil
}

// Conflict implements idem's conflicts: err is (or wraps) a deadlock's
// victim (1213) or a lock wait timeout (1205), whether from the store's
// statements or from a handler's in the same transaction.
func (*driver) Conflict(err error) bool { return errors.Is(err, ErrConflict) || conflict(err) }

// SQLDialect names the store's SQL for idem/admin, which keeps its audit
// table in the store's database.
func (*driver) SQLDialect() string { return "mysql" }

// Driver makes s an idem.Store: it returns the store's handle, for idem's
// constructors. Applications do not call it.
func (s *Store) Driver() seam.Driver[*sql.Tx] { return seam.NewDriver[*sql.Tx](s.d) }

// CheckVersion is the conditional update of a version check, in tx (see
// idem.Options.Versions: an inbox with version checks calls it for each
// event): it sets t's version column to version where the ID is id and the
// version is version-1. See idem.VersionResult for the outcomes; they
// are exact under READ COMMITTED, which the store's transactions use.
func (s *Store) CheckVersion(ctx context.Context, tx *sql.Tx, t idem.VersionTable, id string, version int64) (idem.VersionCheck, error) {
	return s.core.CheckVersion(ctx, tx, t, id, version)
}

// Transition is the state-transition guard, in tx: it sets t's state
// column to to where the ID is id and the state is one of from. See
// idem.TransitionResult for the outcomes.
func (s *Store) Transition(ctx context.Context, tx *sql.Tx, t idem.StateTable, id, to string, from ...string) (idem.TransitionCheck, error) {
	return s.core.Transition(ctx, tx, t, id, to, from...)
}

// Open opens the database at dsn (go-sql-driver/mysql's DSN format, for
// example "user:password@tcp(127.0.0.1:3306)/app") with interpolateParams
// set unless the DSN says otherwise, and returns a store on it; Close
// closes it. It opens two pools on dsn: the database (DB), for
// the program and the store's reads, and the store's own transaction
// pool, whose connections have autocommit off and READ COMMITTED set
// once, when each connects, so that beginning a transaction sends
// nothing (the inbox's transaction is its claim, the handler's statements
// and COMMIT: one round trip less than a store of New, two less under a
// server's default REPEATABLE READ). Options.TxConns sizes the
// transaction pool; set the database's limits on DB.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("idem/mysql: invalid DSN: %w", err) // the driver's parse errors quote no password
	}
	if !strings.Contains(dsn, "interpolateParams=") {
		cfg.InterpolateParams = true
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("idem/mysql: open: %w", err)
	}
	db := sql.OpenDB(conn)
	s, err := newStore(ctx, db, cfg, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// New returns a store on db, checks the server (its version, the
// isolation level, the driver's found-rows setting, max_allowed_packet)
// and, unless
// opts.SkipMigrate, creates or migrates its tables. Open db with
// interpolateParams=true in the DSN: without it every statement with
// arguments is prepared and closed on the server, two more round trips.
// The store begins its transactions on db with START TRANSACTION (and,
// unless db's connections are READ COMMITTED, SET TRANSACTION ISOLATION
// LEVEL READ COMMITTED before it): one or two round trips a transaction
// more than a store of Open, which has a pool of its own.
func New(ctx context.Context, db *sql.DB, opts *Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("idem/mysql: nil db")
	}
	return newStore(ctx, db, nil, opts)
}

// newStore is New, with the transaction pool opened on cfg when it is
// not nil (Open: the store then owns db and closes it).
func newStore(ctx context.Context, db *sql.DB, cfg *gomysql.Config, opts *Options) (_ *Store, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" && !o.NoPrefix {
		o.Prefix = DefaultPrefix
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := check.Options{What: "mysql options"}
	c.Count("TxConns", o.TxConns)
	if cfg == nil && o.TxConns != 0 {
		c.Bad("TxConns", "sizes Open's transaction pool; New has none")
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	if err := o.Source.check(); err != nil {
		return nil, err
	}
	be := &backend{db: db}
	if err := be.inspect(ctx, o.Logger, cfg != nil); err != nil {
		return nil, err
	}
	if cfg != nil {
		if be.tx, err = openTxPool(cfg, be.levelVar, o.TxConns); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				be.tx.Close()
			}
		}()
	}
	returning := be.returning && !o.portable
	be.refuseReturning = o.portable
	core, err := sqlcore.New[*sql.Tx](be, newDialect(o.Schema, o.Prefix, returning), o.Schema, o.Prefix)
	if err != nil {
		return nil, err
	}
	od := sqlcore.OutboxDialect{
		SkipLocked: true,
		ClaimQuery: claimQuery(o.readLimit),
		Read: func(ctx context.Context, f func(q sqlcore.Querier) error) error {
			return f(querier{db: db, refuse: be.refuseReturning})
		},
	}
	s := &Store{core: core, outbox: sqlcore.NewOutbox(core, od), db: db, be: be, returning: returning, owned: cfg != nil}
	s.d = &driver{Core: core, sourced: sourced{s.outbox, o.Source, be}}
	if !o.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	if err := be.checkFoundRows(ctx, core.Name("migrations")); err != nil {
		return nil, err
	}
	return s, nil
}

// WithSource returns a store on the same database and tables whose relays
// use the source settings o (see Options.Source). Closing it does not
// close the database.
func (s *Store) WithSource(o SourceOptions) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return &Store{core: s.core, outbox: s.outbox, db: s.db, be: s.be, returning: s.returning,
		d: &driver{Core: s.core, sourced: sourced{s.outbox, o, s.be}}}, nil
}

// Migrate creates or upgrades the store's tables from the embedded,
// versioned SQL files (one statement each), and records each applied
// migration in <prefix>migrations; it is safe to call repeatedly and
// concurrently. MySQL commits each DDL statement on its own, so
// migrators are serialised by a named lock (GET_LOCK) held on a
// connection of its own, and every statement is idempotent: a migration
// interrupted before its record is run again. The tables are created with
// CREATE TABLE only (online: nothing existing is rewritten).
func (s *Store) Migrate(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("idem/mysql: migrate: %w", err)
	}
	defer conn.Close()
	h := fnv.New64a()
	h.Write([]byte(s.core.Name("migrations")))
	name := fmt.Sprintf("wary-migrate-%016x", h.Sum64())
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, migrateLockWait.Seconds()).Scan(&got); err != nil {
		return fmt.Errorf("idem/mysql: migration lock: %w", err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("idem/mysql: migration lock %s not granted within %v", name, migrateLockWait)
	}
	defer func() {
		rctx, cancel := seam.Detach(ctx)
		defer cancel()
		_, _ = conn.ExecContext(rctx, "DO RELEASE_LOCK(?)", name)
	}()
	if err := s.core.Migrate(ctx, migrations, "sql"); err != nil {
		return classify(err)
	}
	return nil
}

// migrateLockWait is how long Migrate waits for another migrator.
const migrateLockWait = 60 * time.Second

// DB returns the database.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database and the transaction pool if Open opened
// them.
func (s *Store) Close() error {
	if s.owned {
		return errors.Join(s.be.tx.Close(), s.db.Close())
	}
	return nil
}
