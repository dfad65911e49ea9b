// Package sqlite is the SQLite store of package idem, on modernc.org/sqlite
// (no cgo) through database/sql. Its Store is what a program hands idem's
// constructors (idem.NewInbox and the others, which take an
// idem.Store[*sql.Tx]); what they call of it stays behind Store.Driver,
// internal to idem. Inbox
// handlers receive the *sql.Tx in which the delivery was claimed and must
// make every write through it; the program's own transactions (adding to
// the outbox) are the database's (Store.DB). It is the embedded default: one
// file, no server.
//
// Open opens the database with DSN(path): WAL journal, busy_timeout of 15
// seconds, and _txlock=immediate, so every transaction takes SQLite's
// single write lock when it begins (BEGIN IMMEDIATE) and concurrent
// writers queue for it instead of failing to upgrade a read lock. To use a
// *sql.DB of your own with New, open it with the same parameters.
//
// Guarantees: transactions are serialised by the write lock, so of two
// copies of a message claimed at the same time, the second begins after
// the first committed (and finds the claim: a duplicate) or rolled back
// (and takes it). With the acknowledgement sent only after the commit and
// inbox records kept at least the broker's redelivery horizon, each
// message's effect is committed once per consumer (see package idem).
// Durability of a commit follows the database's synchronous setting (FULL
// unless the DSN says otherwise).
//
// Cost: the claim is one statement, prepared once and kept per
// connection (New or Migrate prepares it; Close releases it); in a
// one-row transaction what the inbox adds is mostly the database's own
// work, the two more b-tree pages (its key and the (consumer,
// processed_at) index) the commit writes to the WAL (BENCHMARKS.md,
// "Issue 46: what bounds the inbox": about half the rate of the same
// transaction without the inbox, ahead of the hand-written inbox).
//
// The outbox (outbox.New, outbox.NewRelay) and idempotency keys
// (idem/keys) run on the same Store.
// Writers are serialised, so outbox sequences commit in order. SQLite has
// no SKIP LOCKED: one relay at a time claims rows under a lease (a row in
// <prefix>relay_lease, taken for SourceOptions.Lease and renewed while
// the relay works); other relays check the lease with a plain read, without
// taking the write lock, and wait. A relay that stops releases the lease;
// one that dies holds it until it expires, or until it restarts with the
// same owner name. There is no NOTIFY: relays poll, and an in-process
// producer can call outbox.Relay.Wake after committing.
//
// The tables (prefix "wary_" by default) are created from the embedded SQL
// in sql/ and applied migrations recorded in <prefix>migrations. Times are
// stored as Unix microseconds.
package sqlite
