package idem

import (
	"fmt"
	"github.com/wary-go/wary/broker"
	"time"

	"github.com/wary-go/wary/idem/internal/names"
	"github.com/wary-go/wary/idem/internal/seam"
)

// The types below are what a program handles of the inbox. They are
// defined here once: the SQL stores use them directly.

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
	Headers broker.Headers
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

// VersionTable names the table, and its columns, that a version check
// updates: the consumer's own state table, one row per aggregate.
type VersionTable struct {
	// Table is the table name, optionally schema-qualified ("app.orders").
	Table string
	// IDColumn holds the aggregate ID (a text or UUID column).
	IDColumn string
	// VersionColumn holds the aggregate's version (an integer column).
	VersionColumn string
}

// StateTable names the table, and its columns, that a state-transition guard
// updates.
type StateTable struct {
	// Table is the table name, optionally schema-qualified.
	Table string
	// IDColumn holds the entity ID (a text or UUID column).
	IDColumn string
	// StateColumn holds the state, as text.
	StateColumn string
}

// Validate checks every name of t: the table name, optionally
// schema-qualified, and the columns.
func (t VersionTable) Validate() error {
	return validateTable(t.Table, t.IDColumn, "version column", t.VersionColumn)
}

// Validate checks every name of t.
func (t StateTable) Validate() error {
	return validateTable(t.Table, t.IDColumn, "state column", t.StateColumn)
}

func validateTable(table, idColumn, what, column string) error {
	if _, err := names.ValidateTableName(table); err != nil {
		return err
	}
	if err := names.ValidateIdentifier("ID column", idColumn); err != nil {
		return err
	}
	return names.ValidateIdentifier(what, column)
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

// ErrInvalidName matches every error returned for a consumer name, table
// prefix, table or column name, or idempotency key that is not accepted.
var ErrInvalidName = names.ErrInvalidName

// MaxNameLen is the longest name, in bytes, accepted for a consumer, a
// table prefix or a composed table name (PostgreSQL would silently cut a
// longer one).
const MaxNameLen = names.MaxNameLen

// ValidateConsumer checks a consumer name: 1 to 63 bytes of ASCII letters,
// digits and the characters "_", "-", "." and ":".
func ValidateConsumer(s string) error { return names.ValidateConsumer(s) }

// ErrData matches the errors of a database refusing a value of one message
// (a message ID, key, aggregate ID or header it cannot store): an invalid
// byte sequence, a value too long for its column or index. Retrying the
// same message cannot succeed, so such errors are also broker.Permanent:
// the inbox dead-letters the message (or parks it where the broker cannot
// dead-letter) instead of retrying it for ever, and the other messages keep
// flowing. Connection failures and every other error stay transient.
var ErrData = seam.ErrData

// EarlyAggregate is an aggregate whose early events wait in the store for
// their predecessor.
type EarlyAggregate struct {
	Consumer    string
	AggregateID string
	// Awaited is the version the aggregate awaited when its latest early
	// event was held (its version then, plus one); 0 for events held
	// before the store recorded it. An event applied since without
	// closing the gap has moved the aggregate on.
	Awaited int64
	// FirstVersion and LastVersion are the lowest and highest versions
	// held; Held is how many events are held.
	FirstVersion, LastVersion int64
	Held                      int
	// OldestHeldAt is when the oldest of them was held: the inbox parks
	// them when it is older than its Options.EarlyLimit.
	OldestHeldAt time.Time
}
