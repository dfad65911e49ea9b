// Package postgres is the PostgreSQL store of package idem, on pgx/v5 and
// pgxpool, or on a database/sql *sql.DB of pgx's driver (SQLStore, see
// "Through database/sql" below). Its Store is what a program hands idem's constructors
// (idem.NewInbox and the others, which take an idem.Store[pgx.Tx]); what
// they call of it stays behind Store.Driver, internal to idem. Inbox handlers
// receive the pgx.Tx in which the delivery was claimed and must make every
// write through it; the program's own transactions (adding to the outbox)
// are the pool's.
//
// New creates the tables (prefix "wary_" by default, in the search_path's
// first schema or Options.Schema) from the embedded SQL in sql/, and
// records applied migrations in <prefix>migrations; concurrent migrators
// are serialised with a transaction-scoped advisory lock.
//
// Guarantees: the inbox is one table whose primary key is (consumer,
// message_id) (migration 014); the claim is one INSERT of the record in
// the handler's transaction, at the pool's default isolation (READ
// COMMITTED; SERIALIZABLE works too): no function, no lock of its own, one
// index probe. A second transaction claiming the same message waits on
// the key for the first one and then either finds its record (the first
// committed: a duplicate) or inserts (the first rolled back). With
// Options.InboxSlice, records expire by whole tables: claims go to the
// current table and look in one read-only previous table (one statement,
// three index probes however many records), and a rotation every
// InboxSlice renames the current table previous under an ACCESS EXCLUSIVE
// lock that waits for the claims in it; a claim whose snapshot predates a
// rotation fails as a serialization failure, tried again (see
// docs/retention.md, which also says what each layout costs). So, with
// the acknowledgement sent only after the commit and inbox records kept at
// least the broker's redelivery horizon, each message's effect is
// committed once per consumer (see package idem).
// Version checks are a conditional UPDATE; PostgreSQL re-checks its WHERE
// clause against the newest committed row after waiting for a concurrent
// writer, so two events of one aggregate cannot both apply on the same
// version. Batches claim their messages in ID order, so that concurrent
// batches do not deadlock on each other's claims.
//
// Round trips: a delivery that needs nothing but the claim before its
// handler (no aggregate header, or Options.NoHold, and a first attempt)
// is claimed in the round trip that begins the transaction (BeginClaim:
// a parameterised claim and BEGIN sent as one pipeline), so the inbox adds no
// round trip to the handler's own and the commit: three in all for a
// handler of one statement, as many as the same transaction without the
// inbox. A delivery with an aggregate claims and checks for parked
// messages of its aggregate in one statement after BEGIN (four). A shared
// transaction (idem.Options.Batch) claims all its messages with one
// statement over an array of IDs, sent with BEGIN as well: a strict
// INSERT, without ON CONFLICT, so that the server skips the speculative
// insertion of each row (the handlers' statements, BEGIN with the claim,
// COMMIT). BeginClaim's claims skip the IDs already in the inbox (WHERE
// NOT EXISTS, one more index probe per ID), so that a duplicate, such as
// a redelivery, inserts nothing and raises no error: no line in the
// server's error log, no rolled-back transaction in pg_stat_database, no
// dead row. A batch holding duplicates is begun in its one round trip all
// the same; a duplicate alone commits the empty transaction BEGIN opened
// (one more round trip, no WAL). Only two claimers of the same new ID at
// once meet at the unique index: the second fails with a unique violation
// once the first commits, which BeginClaim reports as a duplicate (one
// ID) or answers by claiming again after BEGIN with ON CONFLICT DO
// NOTHING (several; two round trips more).
//
// What the default inbox costs (BENCHMARKS.md, "Issue 46: what bounds
// the inbox"): no round trip, and about 35 µs of client CPU per message
// (the claim's pipelined batch, the commit's timeout); on the server, a
// probe of the key and one more row with two index entries (the primary
// key and (consumer, processed_at), which the row-delete purge reads). In
// a one-row transaction, one WAL flush long, that is what separates the
// inbox from the same transaction without it (82–88% of its rate on the
// project's shared machine; the shorter the transaction, the larger the
// claim's share), and the inbox runs at 93–112% of the article's
// hand-written one, which writes the same row in a round trip of its own.
// With Options.InboxSlice the claim reads two more index pages (the
// current table's mark, the previous table's key) and writes one index
// entry fewer (the tables a rotation creates have no processed_at index):
// about the default's cost, plus the rotation once per InboxSlice (a
// lock of at most 2 s that claims queue behind, held for two renames and
// a CREATE TABLE; the previous table is dropped after it, and its records
// are counted from PostgreSQL's statistics where ANALYZE has measured it).
//
// No statement is built from a value: message IDs, keys and every other
// value travel as bound parameters, so no session setting (client_encoding,
// backslash_quote, standard_conforming_strings) changes what they mean.
//
// The outbox (outbox.New, outbox.NewRelay) and idempotency keys
// (idem/keys) run on the same Store.
// Outbox rows get their per-aggregate sequence from a counter row that the
// adding transaction upserts and keeps locked until it ends; Outbox.Add
// upserts the counters (in aggregate order), inserts the rows and runs the
// relays' wake-up in one statement, one round trip whatever the number of
// rows (a one-row add binds scalars, a larger one arrays). An adding
// transaction sends a NOTIFY, which relays receive on a dedicated LISTEN
// connection, only while a relay waits for one (each relay's wake flag is
// a row of the unlogged <prefix>outbox_wake, see wake.go): notifying
// commits are serialised by PostgreSQL. Relays claim the lowest unsent row of
// each aggregate with FOR UPDATE SKIP LOCKED, in a transaction they hold
// while they publish that aggregate's rows, and mark them sent in it: a
// relay that dies releases its locks with its connection, and another one
// publishes the rows again. Relays therefore hold a pool connection each
// while publishing. The outbox is one plain table (migration 015, as
// before 010): an add is a plain INSERT and a claim reads one set of
// indexes (BENCHMARKS.md, "The outbox a plain table again": the add and
// the claim within noise of the layout before 010; 010's partitioned
// table cost the claim about 1.6 times its server CPU). With
// Options.OutboxSlice, sent rows expire by whole tables: adds and claims
// run the same statements on <prefix>outbox, the current table; the
// relay's purge, once it is OutboxSlice old, drops <prefix>outbox_prev
// (once every row in it was sent before KeepSent), renames the current
// table previous, creates a new current one and moves the unsent rows
// into it with their IDs and sequences (see docs/retention.md). What
// slicing costs is the rotation: one transaction that waits (at most 2 s)
// for the transactions using the current table, adds and claims queued
// behind it, and moves the unsent rows (at most the purge's batch; more
// postpone it). Row IDs and each aggregate's sequences never repeat.
//
// A relay's batch costs two round trips: BEGIN goes to the server with
// the claim statement as one pipeline, and the statement that marks the
// batch sent (one UPDATE over an array of row IDs, whatever their number)
// with COMMIT as another. The server skips the rest of a pipeline after a
// statement that failed, so a failed mark never commits; the relay then
// rolls back and the rows go again.
//
// The batch's transaction commits with synchronous_commit off: its commit
// waits for no WAL flush. A server crash can lose such a commit (never a
// producer's): the batch's rows are then unsent again and published
// again, as after a relay that died between publish and mark.
//
// Times are stored as timestamptz; the parked messages' headers as JSON
// text and bodies as bytea.
//
// # Through database/sql
//
// A program that writes through database/sql (GORM, ent, bun, sqlx,
// sqlc's database/sql mode) opens the store on its *sql.DB with OpenDB
// instead of New: the *sql.DB must be pgx's (github.com/jackc/pgx/v5/stdlib,
// which GORM's PostgreSQL driver uses), and the store's transactions are
// then *sql.Tx. The inbox claims each delivery in a *sql.Tx and hands it to
// the handler, which writes there, with the ORM's session on that *sql.Tx
// (GORM: a Session whose Statement.ConnPool is the *sql.Tx; see
// examples/gorm); Outbox.Add (idem/outbox) takes the program's own
// *sql.Tx. SQLStore is the same schema, migrations and SQL as Store, and
// passes the same store suite; the two may share a database's tables. Through database/sql a
// claim costs a round trip of its own: BEGIN (database/sql sends it alone),
// the claim, the handler's statements, COMMIT; four round trips for a
// handler of one statement, where Store sends the claim with BEGIN and
// needs three. The relay claims and marks in statements of their own, and
// LISTENs on a pgx connection of its own made with the configuration of
// the *sql.DB's connections. Options.InboxSlice, Options.OutboxSlice and
// SourceOptions.Stream need pgx's protocol and are refused with
// ErrNeedsPgx: run them on a Store from New on the same tables (a
// streaming relay in its own process, say) beside the SQLStore.
package postgres
