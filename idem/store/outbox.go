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
	// AddOutbox inserts msgs in tx and returns their per-aggregate
	// sequences. Each message gets the next sequence of its aggregate,
	// assigned under a lock on the aggregate's counter row that tx holds
	// until it ends: a transaction adding to the same aggregate waits, so
	// sequences of one aggregate commit in order, and a rollback returns
	// its sequences to be reused (no gaps). msgs are valid (see Outbox.Add).
	AddOutbox(ctx context.Context, tx Tx, msgs []OutboxMessage, at time.Time) ([]int64, error)
}

// RelayStore is what a Relay needs from a store: claiming due rows,
// recording outcomes, and the operator's view. Implementations are safe
// for concurrent use, also by relays in several processes.
type RelayStore interface {
	// ClaimOutbox claims up to r.Limit rows for r.Owner: the lowest
	// unsent row (pending or quarantined) of each aggregate, if it is
	// pending and due at r.Now, followed by up to r.PerAggregate-1 more
	// pending rows of the same aggregate, in sequence order. An aggregate
	// whose first unsent row another relay has claimed is skipped. Nothing
	// claimed returns a batch with no rows.
	ClaimOutbox(ctx context.Context, r OutboxClaim) (OutboxBatch, error)
	// ReleaseOutbox gives up whatever owner holds (a lease), so that
	// another relay can take over at once. Relays call it when they stop.
	ReleaseOutbox(ctx context.Context, owner string) error
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

// OutboxClaim is a claim request.
type OutboxClaim struct {
	Owner        string
	Now          time.Time
	Limit        int
	PerAggregate int
	// Aggregates, if positive and below Limit, is the most aggregates
	// (heads) the claim takes; their rows still fill up to Limit, at most
	// PerAggregate each.
	Aggregates int
	// Lease is how long a store that claims by lease (SQLite) keeps the
	// claim when its owner goes silent.
	Lease time.Duration
}

// OutboxBatch is a claimed set of rows. Exactly one of Complete and Release
// must be called.
type OutboxBatch interface {
	// Rows are the claimed rows, each aggregate's in sequence order.
	Rows() []OutboxRow
	// Complete marks sent as sent and records failed, in one transaction,
	// and releases the claim.
	Complete(ctx context.Context, sent []int64, failed []OutboxFailure, at time.Time) error
	// Release releases the claim and records nothing: the rows stay as they
	// were (a crashed relay).
	Release(ctx context.Context) error
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

// ErrLeaseLost is returned by OutboxBatch.Complete of a store that claims
// by lease when the lease ran out or another relay took it: nothing was
// marked, and the rows will be published again by the new holder.
var ErrLeaseLost = errors.New("idem/store: the relay lease was lost; nothing marked")

// ConcurrentClaimer is implemented by stores whose claims exclude each
// other while they are held (PostgreSQL: the claiming transaction locks
// the heads), so that one relay may hold several batches at once and keep
// claiming while earlier ones are being published. A store without it
// (SQLite's lease) is claimed one batch at a time.
type ConcurrentClaimer interface {
	ConcurrentClaims() bool
}

// LeasedBatch is implemented by batches of a store that claims by lease.
// The store renews the lease while the batch is held; LeaseLost is closed
// when a renewal found the lease gone, and the relay then stops publishing
// the batch (its Complete returns ErrLeaseLost).
type LeasedBatch interface {
	OutboxBatch
	LeaseLost() <-chan struct{}
}

// Waker is implemented by stores whose adding transactions can wake a
// relay that waits for rows (PostgreSQL: NOTIFY, LISTEN). A relay calls
// Waker once, with its owner name and how long its wake-up may be left
// unrenewed before the store may take it for a stopped relay's, and uses
// the Wake from its claim loops.
type Waker interface {
	Waker(owner string, ttl time.Duration) Wake
}

// Wake is one relay's wake-up. Its methods are safe for concurrent use.
type Wake interface {
	// Listen calls notify once when it starts listening and once per
	// wake-up, until ctx is done (it then returns nil) or listening fails
	// (the relay listens again after a backoff).
	Listen(ctx context.Context, notify func()) error
	// Idle is called, while listening, by a claim loop that found
	// nothing, before it waits. It returns how long the loop may wait
	// before it claims again: 0 for as long as the relay polls (a
	// notification will wake it), a positive duration to poll sooner, a
	// negative one to claim again at once.
	Idle(ctx context.Context) (time.Duration, error)
	// Busy is called when a claim found rows, and when the relay stops:
	// the relay waits no more. It returns at once when it has nothing to
	// undo.
	Busy(ctx context.Context) error
}
