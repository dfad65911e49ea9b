package idem

import (
	"context"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
)

// Store is what the constructors of this package and of idem/outbox take
// (idem/keys takes the same, unnamed): a store over transactions of type
// Tx, a *postgres.Store (pgx.Tx) or a *sqlite.Store (*sql.Tx). Its one
// method, Driver, returns the store's handle for the constructors, whose
// implementation is internal to idem: applications do not call it. Tx
// keeps a store from a constructor of another transaction type.
type Store[Tx any] = seam.Provider[Tx]

// inboxStore is what the inbox calls of a store, for transactions of type
// Tx (pgx.Tx for idem/postgres, *sql.Tx for idem/sqlite): the store's
// Driver implements it (NewInbox asserts it). The methods that take a Tx
// run inside the caller's transaction; the others run their own.
// Implementations are safe for concurrent use. Programs do not call them:
// the inbox does, and the store packages' own types offer the version check
// and the state guard to handlers.
type inboxStore[Tx any] interface {
	// Begin starts a read-write transaction.
	Begin(ctx context.Context) (Tx, error)
	// Commit commits tx.
	Commit(ctx context.Context, tx Tx) error
	// Rollback rolls tx back; rolling back a finished transaction is not
	// an error.
	Rollback(ctx context.Context, tx Tx) error

	// Claim records r's messages as processed by r.Consumer at r.At, in
	// tx, in the order of r.IDs, and answers for each (see Claimed). A
	// message recorded before (by a committed transaction, or earlier in
	// tx) is not claimed again. Two concurrent transactions claiming the
	// same message: the second waits until the first ends, then fails to
	// claim it (first committed) or claims it (first rolled back).
	Claim(ctx context.Context, tx Tx, r seam.ClaimRequest) ([]seam.Claimed, error)
	// BeginClaim begins a transaction and claims r in it, as Claim does:
	// the inbox's one way into a delivery's transaction, which a store may
	// make cheaper than Begin and Claim (PostgreSQL sends the claim with
	// BEGIN, in one round trip). If it claimed none of r's messages it may
	// begin nothing and return began false: there is no transaction to
	// commit or roll back.
	BeginClaim(ctx context.Context, r seam.ClaimRequest) (tx Tx, began bool, claims []seam.Claimed, err error)
	// Purge deletes at most limit inbox records of consumer claimed before
	// before (and failure records last seen before it), in its own
	// transaction, and returns how many inbox records it deleted.
	Purge(ctx context.Context, consumer string, before time.Time, limit int) (int, error)

	// CheckVersion is the conditional update of a version check, in tx:
	// set t's version column to version where the ID is id and the version
	// is version-1. See VersionResult for the outcomes.
	CheckVersion(ctx context.Context, tx Tx, t VersionTable, id string, version int64) (VersionCheck, error)
	// Transition is the state-transition guard, in tx: set t's state
	// column to to where the ID is id and the state is one of from. See
	// TransitionResult for the outcomes.
	Transition(ctx context.Context, tx Tx, t StateTable, id, to string, from ...string) (TransitionCheck, error)

	// RecordFailure counts one more failed attempt at messageID, in its own
	// transaction, and returns the count and when the first failure was.
	RecordFailure(ctx context.Context, consumer, messageID, reason string, at time.Time) (attempts int, firstSeen time.Time, err error)
	// ClearFailure forgets the failures of messageID, in tx.
	ClearFailure(ctx context.Context, tx Tx, consumer, messageID string) error
	// Park stores p, in tx (p.ID is ignored).
	Park(ctx context.Context, tx Tx, p *Parked) error
	// ListParked lists consumer's parked messages matching f, by aggregate
	// ID and, within an aggregate, in replay order (version, then
	// sequence, then parking order).
	ListParked(ctx context.Context, consumer string, f ParkedFilter) ([]Parked, error)
	// CountParked counts consumer's parked messages matching f (Limit
	// ignored).
	CountParked(ctx context.Context, consumer string, f ParkedFilter) (int, error)
	// DeleteParked deletes the parked message with the given ID, in tx, and
	// reports whether it was there. Concurrent deleters of the same ID: one
	// gets true, the others wait and get false.
	DeleteParked(ctx context.Context, tx Tx, consumer string, id int64) (bool, error)
	// UpdateParked records one more failed replay of a parked message.
	UpdateParked(ctx context.Context, consumer string, id int64, reason string, at time.Time) error
	// DiscardParked deletes parked messages matching f and returns how many.
	DiscardParked(ctx context.Context, consumer string, f ParkedFilter) (int, error)
}

// expirer is implemented by an inboxStore that expires inbox records by whole
// tables rather than row by row (idem/postgres). The inbox calls Expire
// instead of Purge, with its clock's now and its retention: Expire removes
// records claimed before now-retention (possibly later, never earlier),
// and failure records last seen before it, prepares the store for the
// claims to come, and returns how many inbox records it removed; it
// deletes at most limit of the records it removes row by row.
type expirer interface {
	Expire(ctx context.Context, consumer string, now time.Time, retention time.Duration, limit int) (int, error)
}

// earlyStore is the optional part of a store that keeps early events:
// versioned events that arrived before their predecessor (a version gap)
// and wait in the store, not on the broker, until it is applied. The inbox
// finds it by type assertion on the Driver's implementation. Its methods that take a Tx run in the caller's
// transaction.
type earlyStore[Tx any] interface {
	// LockAggregate takes, in tx, a lock on (consumer, aggregateID) held
	// until tx ends, where concurrent transactions need one to see each
	// other's early events (PostgreSQL: an advisory lock); a no-op where
	// writers are serialised anyway (SQLite).
	LockAggregate(ctx context.Context, tx Tx, consumer, aggregateID string) error
	// LockAggregates takes, in tx, the locks of LockAggregate on each of
	// aggregateIDs (duplicates allowed), in one order that every
	// transaction taking several uses (PostgreSQL: the advisory lock keys
	// in ascending order), so that two of them never wait for each other
	// on these locks. Taken before any row of the aggregates is touched,
	// they keep transactions that hold events of several aggregates (a
	// shared transaction, idem.Options.Batch) free of deadlocks.
	LockAggregates(ctx context.Context, tx Tx, consumer string, aggregateIDs []string) error
	// HoldEarly records e in tx, unless an early event of the same
	// (consumer, aggregate, version) is held already (then it reports
	// false). It returns when the aggregate's oldest early event was held.
	HoldEarly(ctx context.Context, tx Tx, e *seam.EarlyEvent) (held bool, oldest time.Time, err error)
	// TakeEarly deletes, in tx, the early event of (consumer, aggregateID,
	// version) and returns it, or nil if there is none.
	TakeEarly(ctx context.Context, tx Tx, consumer, aggregateID string, version int64) (*seam.EarlyEvent, error)
	// TakeAllEarly deletes, in tx, the early events of (consumer,
	// aggregateID) and returns them in version order.
	TakeAllEarly(ctx context.Context, tx Tx, consumer, aggregateID string) ([]seam.EarlyEvent, error)
	// ExpiredEarly lists at most limit aggregates of consumer with an
	// early event held before before.
	ExpiredEarly(ctx context.Context, consumer string, before time.Time, limit int) ([]string, error)
	// CountEarly counts consumer's early events.
	CountEarly(ctx context.Context, consumer string) (int, error)
	// Savepoint sets, in tx, a savepoint that RollbackTo returns to and
	// Release forgets.
	Savepoint(ctx context.Context, tx Tx) error
	RollbackTo(ctx context.Context, tx Tx) error
	Release(ctx context.Context, tx Tx) error
}

// conflicts is implemented by stores whose transactions can fail only
// because of concurrent ones, such that the same work tried again at once
// can succeed (PostgreSQL: a deadlock's victim, SQLSTATE 40P01, or a
// serialization failure, 40001). The inbox tries such a transaction again
// itself, a few times, instead of nacking its deliveries, since a nack
// counts toward the broker's delivery limit. The inbox finds it by type
// assertion on the Driver's implementation.
type conflicts interface {
	// Conflict reports whether err, or an error it wraps, is such a
	// failure.
	Conflict(err error) bool
}
