// Package store is the service provider interface of package idem: what a
// database store implements so that the inbox, the outbox and its relay,
// and idempotency keys can run on it, as package broker/driver is for
// broker drivers. idem/postgres and idem/sqlite implement it (sharing
// idem/internal/sqlcore); users of those stores need not import this
// package.
//
// A store package hands its users a type that implements Provider, whose
// one method returns the Driver, so that the driver's methods stay off the
// user's type. A Driver is four interfaces over one transaction type Tx:
// Admin (the operator's command), Store (inbox
// claims, version checks, state-transition guards, failures and the park),
// OutboxStore (adding rows in the caller's transaction; RelayStore, the
// Source a relay publishes from; OutboxAdmin, the operator's side), and KeyStore (idempotency keys). Methods
// that take a Tx run inside the caller's transaction; the others run their
// own. The inbox enters a delivery's transaction one way, BeginClaim,
// which a store may make cheaper than Begin and Claim. How a relay gets its
// rows (claims, a lease, the database's log, a wake-up) is the store's: its
// Source owns its goroutines, and guarantees each aggregate's rows in
// sequence, no aggregate in two live batches, and a Lost signal
// (idemtest.SourceContract checks it).
// Conflicts lets the inbox recognise a transaction that failed only
// because of a concurrent one, and try it again instead of nacking.
//
// The names a store puts into SQL (table prefixes, the user's table and
// column names of VersionTable and StateTable) must be checked with the
// Validate functions of this package and quoted (QuoteIdentifier).
// Implementations must pass the suites of idem/idemtest.
package store
