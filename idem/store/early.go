package store

import (
	"context"
	"time"
)

// Early is the optional part of a Driver that keeps early events: versioned
// events that arrived before their predecessor (a version gap) and wait in
// the store, not on the broker, until it is applied. idem finds it by type
// assertion on the Driver. Its methods that take a Tx run in the caller's
// transaction.
type Early[Tx any] interface {
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
	HoldEarly(ctx context.Context, tx Tx, e *EarlyEvent) (held bool, oldest time.Time, err error)
	// TakeEarly deletes, in tx, the early event of (consumer, aggregateID,
	// version) and returns it, or nil if there is none.
	TakeEarly(ctx context.Context, tx Tx, consumer, aggregateID string, version int64) (*EarlyEvent, error)
	// TakeAllEarly deletes, in tx, the early events of (consumer,
	// aggregateID) and returns them in version order.
	TakeAllEarly(ctx context.Context, tx Tx, consumer, aggregateID string) ([]EarlyEvent, error)
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

// EarlyEvent is an early event as the store keeps it: the whole message,
// and when it was held.
type EarlyEvent struct {
	Consumer    string
	AggregateID string
	Version     int64
	// Awaited is the version the aggregate awaited when the event was
	// held (its version then, plus one).
	Awaited   int64
	MessageID string
	Key       string
	Headers   map[string]string
	Body      []byte
	HeldAt    time.Time
}
