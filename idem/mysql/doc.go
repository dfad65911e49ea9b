// Package mysql is the MySQL and MariaDB store of package idem, on
// github.com/go-sql-driver/mysql through database/sql. Its Store is what a
// program hands idem's constructors (idem.NewInbox, outbox.New,
// outbox.NewRelay, keys.New, which take an idem.Store[*sql.Tx]); what they
// call of it stays behind Store.Driver, internal to idem. Inbox handlers
// receive the *sql.Tx in which the delivery was claimed and must make
// every write through it; the program's own transactions (adding to the
// outbox) are the database's (Store.DB), so an ORM on database/sql that
// takes a *sql.Tx writes the domain rows in the claiming transaction.
//
// Open opens a DSN with interpolateParams=true (one round trip per
// statement; without it database/sql prepares and closes each statement
// with arguments on the server), and two pools on it: the database
// (Store.DB), for the program and the store's reads, and the store's own
// transaction pool, whose connections have autocommit off and READ
// COMMITTED set when they connect, so that beginning a transaction sends
// nothing: the inbox's transaction is its claim, the handler's statements
// and COMMIT. Options.TxConns bounds it. No one else uses it (a statement
// outside the store's transactions would begin one nobody commits); a
// connection whose COMMIT or ROLLBACK failed, or whose statement was
// canceled, is discarded. New takes a *sql.DB of your own, whose DSN the
// store cannot read: it begins its transactions on it with START
// TRANSACTION, one round trip more (two, see Isolation). Both refuse a
// database whose DSN sets clientFoundRows=true (see below).
//
// Guarantees. The claim is INSERT ... ON DUPLICATE KEY UPDATE that changes
// nothing, on the (consumer, message ID) primary key: MySQL reports 1 row
// affected for an insert and 0 for a duplicate, so the claim knows exactly
// whether it recorded the message; a concurrent claim of the same message
// waits for the first transaction's row lock, then finds the row
// (committed) or inserts it (rolled back). INSERT IGNORE would say the
// same, but also turns a value its column cannot hold into a warning and a
// truncated row; here such a value fails with an error matching
// idem.ErrData, and the message is dead-lettered or parked. With the
// acknowledgement sent only after the commit and inbox records kept at
// least the broker's redelivery horizon, each message's effect is
// committed once per consumer (see package idem). IDs are stored as
// VARBINARY, compared byte for byte.
//
// Isolation. The inbox needs READ COMMITTED: a version check or a
// transition guard whose UPDATE matched no row reads the row to say why,
// and under REPEATABLE READ (MySQL's and MariaDB's default) that read sees
// the transaction's snapshot, which may be older than the row the UPDATE
// saw (an applied transition reported invalid, a stale event a gap);
// READ COMMITTED also takes no gap locks, which would hold producers'
// inserts behind a transaction that merely read near them. The store
// reads the connections' level (transaction_isolation, or tx_isolation on
// MariaDB before 11.1). Open's transaction pool sets READ COMMITTED on
// each connection. Under New, with any other level, the store begins its
// transactions with SET TRANSACTION ISOLATION LEVEL READ COMMITTED, one
// more round trip each, and logs once that the DSN can set it instead
// (transaction_isolation='READ-COMMITTED'; MariaDB before 11.1:
// tx_isolation).
//
// Conflicts. InnoDB's deadlock victim (error 1213) and a lock wait timeout
// (1205), from the store's statements or a handler's, are conflicts: the
// inbox tries the transaction again at once, a few times, before it nacks,
// and the store's errors match ErrConflict.
//
// The outbox (outbox.New, outbox.NewRelay) and idempotency keys
// (idem/keys) run on the same Store. Each aggregate's sequence counter is a
// row locked by the adding transaction until it commits, so producers of
// different aggregates never wait for each other. Relays claim the heads
// of aggregates with FOR UPDATE SKIP LOCKED (MariaDB 10.6 and later,
// MySQL 8.0) in a transaction held while they publish, so several relays
// work at once without a lease. There is no NOTIFY: a relay polls
// (outbox.RelayOptions.PollInterval, and at once again while there is
// work), and an in-process producer can call outbox.Relay.Wake after
// committing; nothing a producer does waits for a relay. A row larger
// than max_allowed_packet (its values escaped, about half the packet)
// fails Add with ErrTooLarge before anything is sent, and an add of many
// rows is split into statements that fit. A row already in the table that
// the server cannot send (written by another program, or before the
// packet was lowered) is claimed without its payload and quarantined with
// the reason, its aggregate waiting behind it; it stays whole in the
// table, to be requeued once max_allowed_packet is raised.
//
// Group commit (idem.Options.Batch): a shared transaction's claim is one
// statement over the IDs as a JSON array (INSERT IGNORE ... SELECT ...
// FROM JSON_TABLE ... RETURNING on MariaDB), the IDs having been validated
// first, so IGNORE has nothing but duplicates to skip.
//
// MySQL 8. Open and New choose the statements from the server (SELECT
// VERSION()): MariaDB 10.6 and later runs four of them with RETURNING
// (recording a failed attempt, the outbox's sequence counters, taking
// early events, a shared transaction's claim); MySQL, which has no
// RETURNING, runs their portable forms, plain MySQL 8 syntax that MariaDB
// runs too: the upsert, then a read of the rows it locked (failures,
// counters: two statements instead of one); a locking read
// (SELECT ... FOR UPDATE), then the DELETE (early events: two); and the
// group claim behind a savepoint (SAVEPOINT, then INSERT IGNORE without
// RETURNING: two), which, when it inserted fewer rows than it has IDs
// (some claimed already or at the same time: which rows are its own it
// cannot tell), rolls back to the savepoint and claims the IDs one by
// one. The minimum versions are MariaDB 10.6 and MySQL 8.0.13 (SKIP LOCKED,
// JSON_TABLE, window functions, expression defaults). MySQL 8 itself was
// not run: the store's suites run on MariaDB 10.11 twice, with each
// form; see docs/stores/mysql.md for what else MySQL lacks or deprecates.
//
// Retention is row by row, as on SQLite: the inbox purges records older
// than its retention (idem.Options.Retention, at least the broker's
// redelivery horizon) in bounded batches (a plain read of the expired
// keys, then a DELETE of those keys, which waits for no claim in
// progress), and the relay purges sent rows
// after outbox.RelayOptions.KeepSent; there is no whole-table retention.
//
// The tables (prefix "wary_" by default) are created from the embedded
// SQL in sql/, one statement per file (no multiStatements needed), and
// applied migrations recorded in <prefix>migrations. MySQL commits each
// DDL statement on its own, so Migrate serialises migrators with a named
// lock (GET_LOCK) and every statement is idempotent. Times are stored as
// Unix microseconds.
//
// Tested on MariaDB 10.11 only (the whole store, outbox, relay, keys and
// broker suites of idem on stores of Open, once with RETURNING and once
// with the portable forms forced; the store and outbox suites again on
// stores of New; a relay and a consumer process killed with SIGKILL
// mid-work, on stores of both).
package mysql
