package postgres

import (
	"context"
	"embed"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/internal/seam"
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
	// InboxSlice, if positive, expires inbox records by whole tables
	// instead of row deletes (see docs/retention.md): claims go to the
	// current table and look in one previous table; every InboxSlice, the
	// inbox's purge drops the previous table, makes the current one the
	// previous and creates a new current one. A record is kept between
	// InboxSlice and twice InboxSlice, so InboxSlice must be at least the
	// retention of every inbox on the store (Expire refuses a longer
	// retention); keep the inbox's PurgeInterval well below it. A claim
	// costs the same few index probes however large the tables are.
	// Every process of the store must set it alike (New refuses to open a
	// sliced inbox without it). Zero: one table, records expire by row
	// deletes, in batches, as with SQLite.
	InboxSlice time.Duration
	// OutboxSlice, if positive, expires the outbox's sent and discarded
	// rows by whole tables instead of row deletes (see docs/retention.md):
	// rows are added to and claimed from the current table, as without
	// it; once the current table is OutboxSlice old, the relay's purge
	// drops the previous table (once every row in it was sent or discarded
	// more than the relay's KeepSent ago), makes the current one the
	// previous one and creates a new current one, moving the unsent rows
	// into it. Adds and claims cost the same as without it; a sent row is
	// kept from KeepSent to about KeepSent plus twice OutboxSlice. Keep the
	// relay's PurgeInterval well below it. Zero: sent rows expire by row
	// deletes, in batches, as with SQLite.
	OutboxSlice time.Duration
	// Source chooses where the store's relays take their rows from (see
	// SourceOptions); Store.WithSource gives another choice on the same
	// tables.
	Source SourceOptions
}

// SourceOptions choose the source a relay on the store publishes from:
// claims from the outbox table (the default), or the database's log. The
// zero value means defaults.
type SourceOptions struct {
	// Stream makes relays read committed rows from the database's log
	// (logical replication, see docs/outbox-wal.md) instead of claiming
	// them from the table. One relay streams at a time; others stand by,
	// and take over when its stream is released. While the server cannot
	// stream, the relay polls the table, and tries the stream again every
	// StreamRetry (default 30s); while the server is out of reach (a
	// restart), every PollInterval. A stream that fails once open is
	// opened again after PollInterval, doubling up to StreamRetry while
	// each new stream fails before it confirmed a position. Published
	// rows are deleted in bulk, at once (the relay's KeepSent applies to
	// rows published by claims only). The stream's rows go to Pipeline
	// lanes by aggregate, each publishing windows of at most the relay's
	// BatchSize rows one after the other.
	//
	// One kind of source serves an outbox: once its stream's slot exists,
	// a relay on a store without Stream stands by (Run) or fails with
	// outbox.ErrOtherSource (RunOnce, Drain) instead of claiming rows the
	// stream also publishes; drop the slot to poll again (the error names
	// it).
	Stream      bool
	StreamRetry time.Duration
	// WALBudget is the most log, in bytes, the stream's slot may retain
	// beyond its confirmed position (default 1 GiB; negative: no
	// budget). A relay checks it before it opens the stream (a relay that
	// was down comes back to its slot) and every StreamRetry while it
	// streams (a relay that stalls). A slot over the budget is dropped
	// (once its relay let go of it): the relay polls the table for
	// StreamRetry, then streams from a new slot, first draining from the
	// table what was committed before it. Nothing is lost; the release is
	// counted in OutboxStreamStatus and the relay's stats (see
	// docs/outbox-wal.md).
	WALBudget int64
	// Pipeline is how many claimed batches (streaming: lanes) a relay
	// publishes at once (default 2): it claims the next batch while
	// earlier ones wait for the broker's confirms. While the relay is
	// behind, each claim takes its share of the aggregates with due rows
	// (1/Pipeline of them, PerAggregate rows each, up to BatchSize), so
	// that on few aggregates every live batch holds heads of its own
	// rather than one holding them all. Each live batch holds a pooled
	// connection until it is settled: keep Pipeline well below the
	// pool's size.
	Pipeline int
	// PerAggregate is the most rows of one aggregate one claim takes
	// (default 10); they are published one after the other.
	PerAggregate int
	// NoListen turns off LISTEN/NOTIFY: relays only poll.
	NoListen bool
}

// check validates o and applies its defaults.
func (o *SourceOptions) check() error {
	c := check.Options{What: "postgres source options"}
	c.Count("Pipeline", o.Pipeline)
	c.Count("PerAggregate", o.PerAggregate)
	c.Duration("StreamRetry", o.StreamRetry, false)
	if err := c.Err(); err != nil {
		return err
	}
	if o.Pipeline < 1 {
		o.Pipeline = 2
	}
	if o.PerAggregate < 1 {
		o.PerAggregate = sqlcore.DefaultPerAggregate
	}
	if o.StreamRetry == 0 {
		o.StreamRetry = 30 * time.Second
	}
	if o.WALBudget == 0 {
		o.WALBudget = defaultWALBudget
	}
	return nil
}

// withDefaults returns a copy of o (nil: the zero Options) with its
// defaults, or an error if it is invalid.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Prefix == "" && !c.NoPrefix {
		c.Prefix = DefaultPrefix
	}
	return c, c.Source.check()
}

// DefaultPrefix is the default table prefix.
const DefaultPrefix = "wary_"

// Store is the PostgreSQL store on a pgxpool.Pool: hand it to
// idem.NewInbox, outbox.New, outbox.NewRelay and keys.New. Handlers
// call CheckVersion and Transition on it inside the inbox transaction. It
// is safe for concurrent use.
type Store struct {
	d *driver
}

// driver is what idem's packages call of the store (behind Store.Driver):
// the shared SQL of sqlcore, and
// what only PostgreSQL does (the claim pipelined with BEGIN, LISTEN/NOTIFY,
// the stream).
type driver struct {
	*sqlcore.Core[pgx.Tx]
	*sqlcore.Outbox[pgx.Tx]
	// shared holds the stream's slot name, LISTEN and Conflict.
	*shared
	pool *pgxpool.Pool
	// slice is Options.InboxSlice; inbox the inbox table's unqualified
	// name and schema its schema ("": the first of the search_path).
	slice         time.Duration
	inbox, schema string
	// outboxSlice is Options.OutboxSlice and outboxTable the outbox
	// table's unqualified name.
	outboxSlice time.Duration
	outboxTable string
	// claimSQL is BeginClaim's claim (without ON CONFLICT: a duplicate
	// makes it insert nothing; a concurrent claimer's commit fails it, so
	// that BEGIN does not run); claimManySQL the same for several IDs,
	// returning those it inserted.
	claimSQL, claimManySQL string
	// simple: the pool's DefaultQueryExecMode is the simple protocol, and
	// BeginClaim does not pipeline (read once: Pool.Config copies the
	// whole configuration, five allocations a claim).
	simple bool
	// src is Options.Source, with its defaults.
	src SourceOptions
}

// Driver makes s an idem.Store: it returns the store's handle, for idem's
// constructors. Applications do not call it.
func (s *Store) Driver() seam.Driver[pgx.Tx] { return seam.NewDriver[pgx.Tx](s.d) }

// New returns a store on pool and, unless opts.SkipMigrate, creates or
// migrates its tables. Migrations are serialised across processes with an
// advisory lock.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("idem/postgres: nil pool")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := dialect
	if o.InboxSlice > 0 {
		d.ClaimMany, d.ClaimCheck, d.ClaimAll, d.Purge = slicedClaimMany, slicedClaimCheck, true, noPurge
	}
	core, err := sqlcore.New[pgx.Tx](backend{pool}, d, o.Schema, o.Prefix)
	if err != nil {
		return nil, err
	}
	claim, many := strictClaim, strictClaimMany
	if o.InboxSlice > 0 {
		claim, many = slicedClaim, slicedStrictClaimMany
	}
	name := strings.NewReplacer("{{inbox}}", core.Name("inbox"), "{{inbox_prev}}", core.Name("inbox_prev"))
	od := outboxDialect(querier{pool})
	if o.OutboxSlice > 0 {
		od.ListFrom = sliceLister
	}
	box := sqlcore.NewOutbox(core, od)
	config := func() *pgx.ConnConfig { return pool.Config().ConnConfig.Copy() }
	s := &Store{d: &driver{Core: core, Outbox: box, shared: newShared(querier{pool}, box, core, config), pool: pool,
		claimSQL: name.Replace(claim), claimManySQL: name.Replace(many), slice: o.InboxSlice, inbox: o.Prefix + "inbox", schema: o.Schema,
		outboxSlice: o.OutboxSlice, outboxTable: o.Prefix + "outbox", src: o.Source,
		simple: pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeSimpleProtocol}}
	if !o.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// WithSource returns a store on the same pool and tables whose relays take
// their rows from the source o chooses (see Options.Source).
func (s *Store) WithSource(o SourceOptions) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	d := s.d
	return &Store{d: &driver{Core: d.Core, Outbox: d.Outbox, shared: d.shared, pool: d.pool, slice: d.slice, inbox: d.inbox, schema: d.schema,
		outboxSlice: d.outboxSlice, outboxTable: d.outboxTable, claimSQL: d.claimSQL, claimManySQL: d.claimManySQL, simple: d.simple, src: o}}, nil
}

// Migrate creates or upgrades the store's tables from the embedded,
// versioned SQL files; it is safe to call concurrently and repeatedly.
// With Options.InboxSlice it then makes the inbox sliced (see
// docs/retention.md); without it, it refuses an inbox that is.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.d.Core.Migrate(ctx, migrations, "sql"); err != nil {
		return err
	}
	return s.d.checkLayout(ctx)
}

// Pool returns the pool.
func (s *Store) Pool() *pgxpool.Pool { return s.d.pool }

// BeginClaim's claims: without ON CONFLICT (whose speculative insertion
// costs the server about as much again per row), an ID already in the
// inbox filtered out by one more index probe, so that a duplicate inserts
// nothing and raises no error. Only two claimers of the same new ID at
// once still meet at the unique index: the second fails with a unique
// violation once the first commits.
const (
	// strictClaim is BeginClaim's claim of one ID: it inserts one row, or
	// none for a duplicate.
	strictClaim = `INSERT INTO {{inbox}} (consumer, message_id, processed_at)
	SELECT $1::text, $2::text, $3::timestamptz
	WHERE NOT EXISTS (SELECT 1 FROM {{inbox}} WHERE consumer = $1 AND message_id = $2)`
	// strictClaimMany is BeginClaim's claim of several IDs, returning
	// those it inserted. OFFSET 0 keeps NOT EXISTS a probe of the key per
	// ID: as an anti join, the generic plan on a small inbox hashed all of
	// the consumer's records.
	strictClaimMany = `INSERT INTO {{inbox}} (consumer, message_id, processed_at)
	SELECT $1, id, $3 FROM unnest($2::text[]) AS ids(id)
	WHERE NOT EXISTS (SELECT 1 FROM {{inbox}} i WHERE i.consumer = $1 AND i.message_id = ids.id OFFSET 0)
	ORDER BY id COLLATE "C"
	RETURNING message_id`
)

var dialect = sqlcore.Dialect{
	Time: func(t time.Time) any { return t },
	Quote: func(schema, name string) string {
		if schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{schema, name}.Sanitize()
	},
	IsNoRows: isNoRows,
	Lock:     "SELECT pg_advisory_xact_lock($1)",
	// A function scan of unnest returns the elements in array order, and
	// the locks are taken row by row as it goes.
	LockMany: "SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k",
	// The inbox is one table with its primary key (migration 014): a claim
	// is one INSERT ... ON CONFLICT DO NOTHING.
	ClaimMany: `INSERT INTO {{inbox}} (consumer, message_id, processed_at)
		SELECT $1, id, $3 FROM unnest($2::text[]) AS ids(id) ORDER BY id COLLATE "C"
		ON CONFLICT (consumer, message_id) DO NOTHING RETURNING message_id`,
	ClaimCheck: `WITH claim AS (INSERT INTO {{inbox}} (consumer, message_id, processed_at) VALUES ($1, $2, $3)
			ON CONFLICT (consumer, message_id) DO NOTHING RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM claim),
			EXISTS (SELECT 1 FROM {{parked}} WHERE consumer = $1 AND aggregate_id = $4)`,
	CreateSchema: "CREATE SCHEMA IF NOT EXISTS %s",
}

// BeginClaim implements the inbox's part (idem's inboxStore). A claim of one message without a
// held check begins a transaction and claims the message in it in one
// round trip; other claims begin, then claim (sqlcore). The claim, a
// parameterised INSERT, and BEGIN go to the server together as one
// pipeline (a pgx.Batch whose first query is the claim, sent with
// Batch.BeginTx so that it hands back the transaction), ended by one Sync.
// PostgreSQL runs statements before a BEGIN in the same implicit
// transaction as part of the block BEGIN opens. No SQL text is built from
// the consumer or the message ID: they travel as bound parameters,
// whatever the session's encoding and string settings.
//
// The INSERT skips an ID already in the inbox (WHERE NOT EXISTS; with
// Options.InboxSlice, in either table): a duplicate inserts nothing and
// raises no error; the transaction began, and BeginClaim commits it (it
// wrote nothing: no WAL, no rollback counted) and returns began false, no
// transaction and the message not New. Concurrent claims of the same new
// message wait for each other at the unique index as Claim's do: the
// second fails with a unique violation once the first commits, the server
// skips BEGIN, the Sync ends the implicit transaction and the connection
// goes back to the pool idle; BeginClaim reports a duplicate as above.
//
// A claim of several messages without held checks (a shared
// transaction's, idem.Options.Batch) is sent with BEGIN too, as one
// INSERT over the array of IDs in ID order, without ON CONFLICT (whose
// speculative insertion costs the server about as much again per row),
// skipping duplicates as above and returning the IDs it inserted: the
// transaction is begun and the new IDs claimed in one round trip, with
// duplicates or not; an ID the request holds twice is sent once, and its
// later copies are duplicates. When a concurrent claimer's commit fails
// it at the unique index, BeginClaim begins and claims them with ON
// CONFLICT DO NOTHING (sqlcore), which tells which ones are new.
//
// With a pool whose DefaultQueryExecMode is the simple protocol (which
// interpolates arguments into the SQL text on the client), BeginClaim does
// not batch: it begins, then claims.
func (s *driver) BeginClaim(ctx context.Context, r seam.ClaimRequest) (pgx.Tx, bool, []seam.Claimed, error) {
	if r.Aggregates != nil && (len(r.IDs) > 1 || r.Aggregates[0] != "") || s.simple {
		return s.Core.BeginClaim(ctx, r)
	}
	if len(r.IDs) > 1 {
		tx, claims, dup, err := s.beginClaimMany(ctx, r)
		if dup {
			return s.Core.BeginClaim(ctx, r)
		}
		return tx, err == nil, claims, err
	}
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{BeginQuery: s.claimSQL})
	b.QueuedQueries[0].Arguments = []any{r.Consumer, r.IDs[0], r.At}
	var claimed int64 = -1
	b.QueuedQueries[0].Exec(func(ct pgconn.CommandTag) error {
		claimed = ct.RowsAffected()
		return nil
	})
	b.Queue("BEGIN")
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	err := br.Close()
	if err == nil && tx.Conn().PgConn().TxStatus() != 'T' {
		err = errors.New("idem/postgres: the claim batch left no transaction open")
	}
	if err == nil && claimed == 0 { // a duplicate
		// The transaction wrote nothing: its commit writes no WAL, and
		// counts no rollback in pg_stat_database.
		if err := tx.Commit(ctx); err != nil {
			return nil, false, nil, classify(err)
		}
		return nil, false, []seam.Claimed{{}}, nil
	}
	if err != nil {
		// Releases the connection: closed already (ErrTxClosed) when the
		// claim failed, since the Sync ended the implicit transaction.
		rctx, cancel := seam.Detach(ctx)
		_ = tx.Rollback(rctx)
		cancel()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
			return nil, false, []seam.Claimed{{}}, nil
		}
		return nil, false, nil, classify(err)
	}
	return tx, true, []seam.Claimed{{New: true}}, nil
}

// beginClaimMany is BeginClaim's pipelined claim of several IDs (see
// BeginClaim): an ID r holds twice is sent once, its first copy New if
// claimed and the later ones duplicates. dup reports a unique violation
// (a concurrent claimer's commit), which began nothing.
func (s *driver) beginClaimMany(ctx context.Context, r seam.ClaimRequest) (tx pgx.Tx, claims []seam.Claimed, dup bool, err error) {
	got := make(map[string]bool, len(r.IDs))
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{BeginQuery: s.claimManySQL})
	b.QueuedQueries[0].Arguments = []any{r.Consumer, distinct(r.IDs), r.At}
	b.QueuedQueries[0].Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			got[id] = true
		}
		return rows.Err()
	})
	b.Queue("BEGIN")
	br := s.pool.SendBatch(ctx, b)
	tx = br.Tx()
	err = br.Close()
	if err == nil && tx.Conn().PgConn().TxStatus() != 'T' {
		err = errors.New("idem/postgres: the claim batch left no transaction open")
	}
	if err != nil {
		rctx, cancel := seam.Detach(ctx) // releases the connection, as in BeginClaim
		_ = tx.Rollback(rctx)
		cancel()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
			return nil, nil, true, nil
		}
		return nil, nil, false, classify(err)
	}
	claims = make([]seam.Claimed, len(r.IDs))
	for i, id := range r.IDs {
		claims[i].New = got[id]
		delete(got, id) // a later copy in r is a duplicate
	}
	return tx, claims, false, nil
}

// distinct returns ids without their repeated IDs (ids itself if none
// repeats), so that the batch claim never inserts an ID twice.
func distinct(ids []string) []string {
	seen := make(map[string]struct{}, len(ids))
	for i, id := range ids {
		if _, ok := seen[id]; ok {
			out := slices.Clone(ids[:i])
			for _, id := range ids[i+1:] {
				if _, ok := seen[id]; !ok {
					seen[id] = struct{}{}
					out = append(out, id)
				}
			}
			return out
		}
		seen[id] = struct{}{}
	}
	return ids
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

// querier runs statements in a transaction, or on the pool (each its own
// transaction).
type querier struct {
	tx interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
}

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), classify(err)
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) sqlcore.Row {
	return row{q.tx.QueryRow(ctx, sql, args...)}
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlcore.Rows, error) {
	r, err := q.tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	return rows{r}, nil
}

type row struct{ pgx.Row }

func (r row) Scan(dest ...any) error { return classify(r.Row.Scan(dest...)) }

type rows struct{ pgx.Rows }

func (r rows) Err() error { return classify(r.Rows.Err()) }

// classify marks the errors of PostgreSQL refusing a value of one message
// as idem.ErrData (and broker.Permanent): data exceptions (SQLSTATE class
// 22: an invalid byte sequence, a value too long, a character with no
// equivalent in the client encoding) and 54000 program_limit_exceeded (an
// index row over its size limit). Retrying the same message cannot succeed.
// A sliced claim refused by the current table's check (its snapshot
// predates a rotation) becomes a serialization failure, which the inbox
// retries (staleClaim). Everything else, connection failures first, is
// left as it is (transient).
func classify(err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	if strings.HasPrefix(pe.Code, "22") || pe.Code == "54000" {
		return seam.DataError(err)
	}
	if stale := staleClaim(pe); stale != nil {
		return stale
	}
	return err
}

// CheckVersion is the conditional update of a version check, in tx (see
// idem.Options.Versions: an inbox with version checks calls it for each
// event): it sets t's version column to version where the ID is id and the
// version is version-1.
// See idem.VersionResult for the outcomes.
func (s *Store) CheckVersion(ctx context.Context, tx pgx.Tx, t idem.VersionTable, id string, version int64) (idem.VersionCheck, error) {
	c, err := s.d.CheckVersion(ctx, tx, idem.VersionTable(t), id, version)
	return idem.VersionCheck{Result: idem.VersionResult(c.Result), Current: c.Current}, err
}

// Transition is the state-transition guard, in tx: it sets t's state
// column to to where the ID is id and the state is one of from. See
// idem.TransitionResult for the outcomes.
func (s *Store) Transition(ctx context.Context, tx pgx.Tx, t idem.StateTable, id, to string, from ...string) (idem.TransitionCheck, error) {
	c, err := s.d.Transition(ctx, tx, idem.StateTable(t), id, to, from...)
	return idem.TransitionCheck{Result: idem.TransitionResult(c.Result), State: c.State}, err
}
