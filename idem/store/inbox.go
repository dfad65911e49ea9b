package store

import (
	"context"
	"fmt"
	"time"
)

// Store is the inbox's side of a Driver, for transactions of type Tx
// (pgx.Tx for idem/postgres, *sql.Tx for idem/sqlite). The methods that take
// a Tx run inside the caller's transaction; the others run their own.
// Implementations are safe for concurrent use. Programs do not call them:
// idem does, and the store packages' own types offer the version check and
// the state guard to handlers.
type Store[Tx any] interface {
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
	Claim(ctx context.Context, tx Tx, r ClaimRequest) ([]Claimed, error)
	// BeginClaim begins a transaction and claims r in it, as Claim does:
	// the inbox's one way into a delivery's transaction, which a store may
	// make cheaper than Begin and Claim (PostgreSQL sends the claim with
	// BEGIN, in one round trip). If it claimed none of r's messages it may
	// begin nothing and return began false: there is no transaction to
	// commit or roll back.
	BeginClaim(ctx context.Context, r ClaimRequest) (tx Tx, began bool, claims []Claimed, err error)
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

// Expirer is implemented by a Store that expires inbox records by whole
// tables rather than row by row (idem/postgres). The inbox calls Expire
// instead of Purge, with its clock's now and its retention: Expire removes
// records claimed before now-retention (possibly later, never earlier),
// and failure records last seen before it, prepares the store for the
// claims to come, and returns how many inbox records it removed; it
// deletes at most limit of the records it removes row by row.
type Expirer interface {
	Expire(ctx context.Context, consumer string, now time.Time, retention time.Duration, limit int) (int, error)
}

// Parked is a message that could not be applied and waits for an operator.
type Parked struct {
	// ID identifies the parked message in the store.
	ID          int64
	Consumer    string
	MessageID   string
	AggregateID string // from HeaderAggregateID, or empty
	Version     int64  // from HeaderAggregateVersion, or 0
	Sequence    int64  // from HeaderSequence, or 0
	// Key, Headers and Body are the message as it was delivered. Stores
	// keep Headers and Body byte for byte, also names and values that are
	// not UTF-8 (the SQL stores write such headers base64-encoded).
	Key     string
	Headers map[string]string
	Body    []byte
	// Reason says why the message was parked (or, after a failed replay,
	// why the replay stopped).
	Reason string
	// Attempts counts the failed attempts: deliveries before parking plus
	// failed replays.
	Attempts int
	// FirstSeen is the first failed attempt; LastSeen the latest.
	FirstSeen time.Time
	LastSeen  time.Time
}

// ParkedFilter selects parked messages. The zero value selects all.
type ParkedFilter struct {
	// AggregateID, with HasAggregate, selects one aggregate's messages
	// (an empty AggregateID with HasAggregate selects messages that carry
	// no aggregate ID).
	AggregateID  string
	HasAggregate bool
	// AfterAggregate, with HasAfter, selects the messages of aggregates
	// whose ID sorts after AfterAggregate in the order ListParked lists
	// aggregates (the database's): a cursor for paging through aggregates.
	AfterAggregate string
	HasAfter       bool
	// ID, if not zero, selects one parked message.
	ID int64
	// Limit, if positive, caps the number of rows.
	Limit int
	// NoBody lists the messages without their bodies (Body nil), which
	// the store then does not read: a listing whose memory does not grow
	// with the size of the messages.
	NoBody bool
}

// VersionResult is the outcome of a version check.
type VersionResult int

// Version check outcomes.
const (
	// VersionApplied: the aggregate was at version-1 and is now at version;
	// apply the event's effect in the same transaction.
	VersionApplied VersionResult = iota + 1
	// VersionStale: the aggregate is already at version or later. The event
	// is a duplicate or arrived after a newer one; it must not be applied.
	VersionStale
	// VersionGap: the aggregate is below version-1: at least one earlier
	// event has not been applied yet.
	VersionGap
	// VersionMissing: there is no row for the aggregate.
	VersionMissing
)

func (r VersionResult) String() string {
	switch r {
	case VersionApplied:
		return "applied"
	case VersionStale:
		return "duplicate or stale"
	case VersionGap:
		return "gap"
	case VersionMissing:
		return "missing aggregate"
	}
	return fmt.Sprintf("VersionResult(%d)", int(r))
}

// VersionCheck is a version check's outcome and the aggregate's version as
// read (after the update, for VersionApplied; 0 for VersionMissing).
type VersionCheck struct {
	Result  VersionResult
	Current int64
}

// TransitionResult is the outcome of a state-transition guard.
type TransitionResult int

// Transition outcomes.
const (
	// TransitionApplied: the entity was in an allowed source state and is
	// now in the target state.
	TransitionApplied TransitionResult = iota + 1
	// TransitionAlready: the entity was already in the target state; the
	// event is a duplicate.
	TransitionAlready
	// TransitionInvalid: the entity is in a state the target cannot be
	// reached from (a cancellation after shipping): the event is stale and
	// must not overwrite the newer state.
	TransitionInvalid
	// TransitionMissing: there is no row for the entity.
	TransitionMissing
)

func (r TransitionResult) String() string {
	switch r {
	case TransitionApplied:
		return "applied"
	case TransitionAlready:
		return "already in target state"
	case TransitionInvalid:
		return "invalid transition"
	case TransitionMissing:
		return "missing"
	}
	return fmt.Sprintf("TransitionResult(%d)", int(r))
}

// TransitionCheck is a guard's outcome and the state as read (the new
// state for TransitionApplied, "" for TransitionMissing).
type TransitionCheck struct {
	Result TransitionResult
	State  string
}

// ClaimRequest names the messages a claim records for a consumer.
type ClaimRequest struct {
	Consumer string
	// IDs are distinct message IDs, in the order to claim them (the inbox
	// sorts them, so that concurrent claims of overlapping sets cannot
	// deadlock on each other).
	IDs []string
	// Aggregates, if not nil, holds an aggregate ID for each of IDs (""
	// for none): for each message claimed with one, the answer says
	// whether Consumer has a parked message of that aggregate.
	Aggregates []string
	// At is the time recorded.
	At time.Time
}

// Claimed is a claim's answer for one message.
type Claimed struct {
	// New: this claim recorded the message; false: it was recorded
	// before (a duplicate).
	New bool
	// Held: New, and the consumer has a parked message of the message's
	// aggregate (ClaimRequest.Aggregates), so it must wait behind it.
	Held bool
}
