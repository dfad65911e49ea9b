package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// OutboxMessage is one event written to the outbox in the domain
// transaction.
type OutboxMessage struct {
	// ID is the message's stable logical ID, which becomes broker.Message.ID
	// (the broker's dedup ID and the consumer inbox's key). Empty: Add
	// fills it with broker.NewID(); the caller sees it.
	ID string
	// AggregateID identifies the aggregate (entity) the event belongs to;
	// required. It becomes broker.Message.Key, the ordering key, and the
	// header HeaderAggregateID.
	AggregateID string
	// Version is the aggregate's version after the event (HeaderAggregateVersion),
	// or 0 for events that do not bump it.
	Version int64
	// Type is the event type name (HeaderType), optional.
	Type string
	// Headers are extra application headers (a W3C traceparent, say).
	// Values must be valid UTF-8; the four event headers of this package
	// are written by the relay and may not be set here.
	Headers map[string]string
	// Payload is the message body.
	Payload []byte
}

// OutboxState is the state of an outbox row.
type OutboxState int

// Outbox row states.
const (
	// OutboxPending: committed and not yet published (or published, and
	// the relay crashed before marking it).
	OutboxPending OutboxState = iota
	// OutboxSent: published; the broker confirmed it.
	OutboxSent
	// OutboxQuarantined: publishing failed permanently or too often. The
	// row blocks the later rows of its aggregate until an operator
	// requeues or discards it.
	OutboxQuarantined
	// OutboxDiscarded: an operator gave up on the row; it no longer blocks
	// its aggregate and is never published.
	OutboxDiscarded
)

func (s OutboxState) String() string {
	switch s {
	case OutboxPending:
		return "pending"
	case OutboxSent:
		return "sent"
	case OutboxQuarantined:
		return "quarantined"
	case OutboxDiscarded:
		return "discarded"
	}
	return fmt.Sprintf("OutboxState(%d)", int(s))
}

// OutboxRow is an outbox message as stored.
type OutboxRow struct {
	OutboxMessage
	// RowID identifies the row in the store (increasing in insertion order).
	RowID int64
	// Sequence is the row's per-aggregate sequence: 1, 2, 3, ... in commit
	// order, without gaps (HeaderSequence).
	Sequence  int64
	State     OutboxState
	CreatedAt time.Time
	// Attempts counts failed publish attempts.
	Attempts int
	// NextAttempt is when a pending row that failed may be tried again.
	NextAttempt time.Time
	// LastError is the last publish failure.
	LastError string
	// SentAt is when the row was marked sent (or discarded).
	SentAt time.Time
	// Invalid, when not nil, says why the row cannot be published: it did
	// not decode (headers that are not a JSON object of strings, say), or
	// holds what Add refuses (an empty or blank message ID, an empty
	// aggregate ID: a row another writer put in the table). A store
	// returns such a row rather than failing the claim or the stream, with
	// what it could read (at least RowID; AggregateID as the table holds
	// it), and the relay quarantines it with this error as its last error.
	Invalid error
}

// OutboxStore is the database side of the outbox, for transactions of type
// Tx. idem/postgres and idem/sqlite implement it.
type OutboxStore[Tx any] interface {
	RelayStore
	OutboxAdmin
	// AddOutbox inserts msgs in tx and returns their per-aggregate
	// sequences. Each message gets the next sequence of its aggregate,
	// assigned under a lock on the aggregate's counter row that tx holds
	// until it ends: a transaction adding to the same aggregate waits, so
	// sequences of one aggregate commit in order, and a rollback returns
	// its sequences to be reused (no gaps). msgs are valid (see Outbox.Add).
	AddOutbox(ctx context.Context, tx Tx, msgs []OutboxMessage, at time.Time) ([]int64, error)
}

// OutboxAdmin is the operator's side of the outbox: listing rows, moving
// them between states, the backlog, and purging sent rows. A Relay's
// Quarantined, Requeue, Discard, Health and Purge call it; it is not what
// the relay publishes from (RelayStore).
type OutboxAdmin interface {
	// OutboxHealth reports the backlog as of now.
	OutboxHealth(ctx context.Context, now time.Time) (OutboxHealth, error)
	// ListOutbox lists rows matching f, in row order.
	ListOutbox(ctx context.Context, f OutboxFilter) ([]OutboxRow, error)
	// SetOutboxState moves the row with the given ID from one of from to
	// to (requeue: quarantined to pending with attempts reset; discard: to
	// discarded) and reports whether it did.
	SetOutboxState(ctx context.Context, rowID int64, to OutboxState, at time.Time, from ...OutboxState) (bool, error)
	// PurgeOutbox deletes at most limit sent or discarded rows marked
	// before before, and returns how many.
	PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error)
}

// OutboxFailure is one failed publish.
type OutboxFailure struct {
	RowID       int64
	Error       string
	NextAttempt time.Time
	Quarantine  bool
}

// OutboxFilter selects outbox rows. The zero value selects every row.
type OutboxFilter struct {
	// States, if not empty, selects rows in one of these states.
	States []OutboxState
	// AggregateID, if not empty, selects one aggregate's rows.
	AggregateID string
	// AfterRow, if positive, selects rows whose RowID is greater: a
	// cursor for paging through rows.
	AfterRow int64
	// Limit, if positive, caps the number of rows.
	Limit int
	// NoPayload lists the rows without their payloads (Payload nil),
	// which the store then does not read.
	NoPayload bool
}

// OutboxHealth is the outbox's backlog.
type OutboxHealth struct {
	// Backlog counts pending rows (due or backing off).
	Backlog int64
	// Retrying counts pending rows that failed at least once.
	Retrying int64
	// Quarantined counts quarantined rows.
	Quarantined int64
	// OldestUnsent is the creation time of the oldest pending or
	// quarantined row (zero if none), and OldestUnsentAge its age.
	OldestUnsent    time.Time
	OldestUnsentAge time.Duration
}

// ErrLeaseLost is returned by Source.Settle of a source that claims by
// lease when the lease ran out or another relay took it, and by a relay
// whose batch's Lost channel closed (a lease, a stream gone): nothing was
// marked, and the rows will be published again.
var ErrLeaseLost = errors.New("idem/store: the batch's claim was lost; nothing marked")
