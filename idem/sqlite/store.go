package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/internal/names"
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
	// Schema, if set, qualifies the store's tables with an attached
	// database's name.
	Schema string
	// SkipMigrate leaves the schema alone; call Migrate yourself.
	SkipMigrate bool
	// Source sets up the source the store's relays publish from (see
	// SourceOptions); Store.WithSource gives other settings on the same
	// tables.
	Source SourceOptions
}

// SourceOptions set up the source of the store's relays: one relay at a
// time holds a lease and claims rows from the outbox table. The zero value
// means defaults.
type SourceOptions struct {
	// PerAggregate is the most rows of one aggregate one claim takes
	// (default 10); they are published one after the other.
	PerAggregate int
	// Lease is how long a relay's claim survives a relay that stopped
	// without releasing it (default 30s).
	Lease time.Duration
}

// check validates o and applies its defaults.
func (o *SourceOptions) check() error {
	c := check.Options{What: "sqlite source options"}
	c.Count("PerAggregate", o.PerAggregate)
	c.Duration("Lease", o.Lease, false)
	if err := c.Err(); err != nil {
		return err
	}
	if o.PerAggregate < 1 {
		o.PerAggregate = sqlcore.DefaultPerAggregate
	}
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	return nil
}

// DefaultPrefix is the default table prefix.
const DefaultPrefix = "wary_"

// Store is the SQLite store on a *sql.DB opened with the modernc.org/sqlite
// driver: hand it to idem.NewInbox, outbox.New, outbox.NewRelay and
// keys.New. Handlers call CheckVersion and Transition on it inside the
// inbox transaction. It is safe for concurrent use.
type Store struct {
	core   *sqlcore.Core[*sql.Tx]
	outbox *sqlcore.Outbox[*sql.Tx]
	d      *driver
	db     *sql.DB
	owned  bool
	stmts  *prepared
	// derived: made by WithSource, sharing s's database and statements.
	derived bool
}

// driver is the store's implementation of what idem's packages call, with
// the shared SQL of sqlcore: the inbox's part (Core), the outbox's, the
// relay's and the keys' (sourced). sqlcore.Outbox's wake flag methods are
// PostgreSQL's; no polling source of this store is given a Wake, so they
// are never called: SQLite has no LISTEN.
type driver struct {
	*sqlcore.Core[*sql.Tx]
	sourced
}

// sourced is the outbox with the store's source settings.
type sourced struct {
	*sqlcore.Outbox[*sql.Tx]
	src SourceOptions
}

// OutboxSource implements the relay's part: claims under the relay lease.
func (o sourced) OutboxSource(_ context.Context, c seam.SourceConfig) (seam.Source[outbox.Row], error) {
	return o.PollSource(c, sqlcore.PollOptions{PerAggregate: o.src.PerAggregate, Lease: o.src.Lease}), nil
}

// Driver makes s an idem.Store: it returns the store's handle, for idem's
// constructors. Applications do not call it.
func (s *Store) Driver() seam.Driver[*sql.Tx] { return seam.NewDriver[*sql.Tx](s.d) }

// CheckVersion is the conditional update of a version check, in tx (see
// idem.Options.Versions: an inbox with version checks calls it for each
// event): it sets t's version column to version where the ID is id and the
// version is version-1.
// See idem.VersionResult for the outcomes.
func (s *Store) CheckVersion(ctx context.Context, tx *sql.Tx, t idem.VersionTable, id string, version int64) (idem.VersionCheck, error) {
	c, err := s.core.CheckVersion(ctx, tx, idem.VersionTable(t), id, version)
	return idem.VersionCheck{Result: idem.VersionResult(c.Result), Current: c.Current}, err
}

// Transition is the state-transition guard, in tx: it sets t's state
// column to to where the ID is id and the state is one of from. See
// idem.TransitionResult for the outcomes.
func (s *Store) Transition(ctx context.Context, tx *sql.Tx, t idem.StateTable, id, to string, from ...string) (idem.TransitionCheck, error) {
	c, err := s.core.Transition(ctx, tx, idem.StateTable(t), id, to, from...)
	return idem.TransitionCheck{Result: idem.TransitionResult(c.Result), State: c.State}, err
}

// busyTimeout is how long a statement waits for another connection's lock
// (SQLite's busy_timeout) before it fails with SQLITE_BUSY.
const busyTimeout = 15 * time.Second

// DSN returns the data source name Open uses for the database file path:
// WAL journal, a busy timeout of 15 seconds, and BEGIN IMMEDIATE for every
// transaction, so that concurrent writers queue for the write lock instead
// of failing to upgrade a read lock.
func DSN(path string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(" + strconv.FormatInt(busyTimeout.Milliseconds(), 10) + ")" +
		"&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"
}

// Open opens (creating if needed) the database file at path with DSN(path)
// and returns a store on it; Close closes the database.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	db, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		return nil, err
	}
	s, err := New(ctx, db, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New returns a store on db and, unless opts.SkipMigrate, creates or
// migrates its tables. Open db with a DSN that sets a busy timeout and
// _txlock=immediate (see DSN); without them concurrent transactions fail
// with SQLITE_BUSY.
func New(ctx context.Context, db *sql.DB, opts *Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("idem/sqlite: nil db")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" && !o.NoPrefix {
		o.Prefix = DefaultPrefix
	}
	if err := o.Source.check(); err != nil {
		return nil, err
	}
	stmts := &prepared{}
	core, err := sqlcore.New[*sql.Tx](backend{sqlcore.StdBackend{DB: db}, stmts}, dialect, o.Schema, o.Prefix)
	if err != nil {
		return nil, err
	}
	s := &Store{core: core, outbox: sqlcore.NewOutbox(core, outboxDialect(db)), db: db, stmts: stmts}
	s.d = &driver{Core: core, sourced: sourced{s.outbox, o.Source}}
	if !o.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	} else {
		s.stmts.prepare(ctx, db, core.ClaimQueries()) // where the tables are there already
	}
	return s, nil
}

// WithSource returns a store on the same database and tables whose relays
// use the source settings o (see Options.Source). Closing it closes
// neither the database nor the statements it shares with s.
func (s *Store) WithSource(o SourceOptions) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return &Store{core: s.core, outbox: s.outbox, db: s.db, stmts: s.stmts, derived: true,
		d: &driver{Core: s.core, sourced: sourced{s.outbox, o}}}, nil
}

// Migrate creates or upgrades the store's tables from the embedded,
// versioned SQL files; it is safe to call repeatedly.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.core.Migrate(ctx, migrations, "sql"); err != nil {
		return err
	}
	s.stmts.prepare(ctx, s.db, s.core.ClaimQueries())
	return nil
}

// prepared holds the claim's statements, prepared once on the database
// (they need its tables: New or Migrate prepares them). modernc.org/sqlite
// parses a statement on every call made with its text; a prepared one
// keeps its compiled program on each connection that ran it (sql.Tx.Stmt),
// which saves the claim's parse in every inbox transaction.
type prepared struct {
	mu sync.RWMutex
	m  map[string]*sql.Stmt
}

// prepare prepares those of qs not prepared yet; one that fails (its
// tables missing) is left to be parsed per call.
func (p *prepared) prepare(ctx context.Context, db *sql.DB, qs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[string]*sql.Stmt, len(qs))
	}
	for _, q := range qs {
		if p.m[q] != nil {
			continue
		}
		if st, err := db.PrepareContext(ctx, q); err == nil {
			p.m[q] = st
		}
	}
}

// in returns q's prepared statement for use in tx, nil if q is not
// prepared.
func (p *prepared) in(ctx context.Context, tx *sql.Tx, q string) *sql.Stmt {
	p.mu.RLock()
	st := p.m[q]
	p.mu.RUnlock()
	if st == nil {
		return nil
	}
	return tx.StmtContext(ctx, st)
}

// close closes the prepared statements.
func (p *prepared) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for q, st := range p.m {
		_ = st.Close()
		delete(p.m, q)
	}
}

// DB returns the database.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database if Open opened it, and the store's prepared
// statements.
func (s *Store) Close() error {
	if s.derived {
		return nil
	}
	s.stmts.close()
	if s.owned {
		return s.db.Close()
	}
	return nil
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

var dialect = sqlcore.Dialect{
	Rebind: func(q string) string { return placeholder.ReplaceAllString(q, "?$1") },
	Time:   func(t time.Time) any { return t.UnixMicro() },
	Quote: func(schema, name string) string {
		if schema == "" {
			return names.QuoteIdentifier(name)
		}
		return names.QuoteIdentifier(schema) + "." + names.QuoteIdentifier(name)
	},
	IsNoRows: func(err error) bool { return errors.Is(err, sql.ErrNoRows) },
	// A shared transaction's claim (idem.Options.Batch) is one statement
	// over the IDs as a JSON array (json_each), parsed once, not one
	// statement parsed again for each message. The WHERE keeps SQLite's
	// parser from reading ON CONFLICT as a join's ON.
	ClaimMany: `INSERT INTO {{inbox}} (consumer, message_id, processed_at)
		SELECT $1, value, $3 FROM json_each($2) WHERE true ORDER BY value
		ON CONFLICT (consumer, message_id) DO NOTHING RETURNING message_id`,
	Array: sqlcore.JSONArray,
}

// backend is sqlcore's database/sql backend with the claim's prepared
// statements in Q.
type backend struct {
	sqlcore.StdBackend
	stmts *prepared
}

func (b backend) Q(tx *sql.Tx) sqlcore.Querier { return querier{tx, b.stmts} }

type querier struct {
	tx    *sql.Tx
	stmts *prepared
}

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := q.stmts.in(ctx, q.tx, query); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = q.tx.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, classify(err)
	}
	return res.RowsAffected()
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) sqlcore.Row {
	return row{q.tx.QueryRowContext(ctx, query, args...)}
}

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlcore.Rows, error) {
	var rows *sql.Rows
	var err error
	if st := q.stmts.in(ctx, q.tx, query); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = q.tx.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return nil, classify(err)
	}
	return sqlcore.StdRows{Rows: rows}, nil
}

type row struct{ *sql.Row }

func (r row) Scan(dest ...any) error { return classify(r.Row.Scan(dest...)) }

// classify marks SQLITE_TOOBIG (a string or blob over the database's
// limit) as idem.ErrData, an error of the message's own values that no
// retry fixes; every other error is left as it is.
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == 18 { // SQLITE_TOOBIG
		return seam.DataError(err)
	}
	return err
}
