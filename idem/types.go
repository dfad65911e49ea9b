package idem

import "github.com/wary-go/wary/idem/store"

// The types below are defined by idem/store, the stores' interface, and
// re-exported here for users of the inbox, the outbox and Keys.

// Parked is a message that could not be applied and waits for an operator
// (Inbox.Parked).
type Parked = store.Parked

// ParkedFilter selects parked messages. The zero value selects all.
type ParkedFilter = store.ParkedFilter

// VersionTable names the consumer's state table and columns a version
// check updates (Inbox.Versioned, Store.CheckVersion).
type VersionTable = store.VersionTable

// StateTable names the table and columns a state-transition guard updates
// (Store.Transition).
type StateTable = store.StateTable

// VersionResult is the outcome of a version check.
type VersionResult = store.VersionResult

// VersionCheck is a version check's outcome and the aggregate's version.
type VersionCheck = store.VersionCheck

// Version check outcomes (see store.VersionResult).
const (
	VersionApplied = store.VersionApplied
	VersionStale   = store.VersionStale
	VersionGap     = store.VersionGap
	VersionMissing = store.VersionMissing
)

// TransitionResult is the outcome of a state-transition guard.
type TransitionResult = store.TransitionResult

// TransitionCheck is a guard's outcome and the state as read.
type TransitionCheck = store.TransitionCheck

// Transition outcomes (see store.TransitionResult).
const (
	TransitionApplied = store.TransitionApplied
	TransitionAlready = store.TransitionAlready
	TransitionInvalid = store.TransitionInvalid
	TransitionMissing = store.TransitionMissing
)

// OutboxMessage is one event written to the outbox (Outbox.Add).
type OutboxMessage = store.OutboxMessage

// OutboxRow is an outbox message as stored (Relay.Quarantined).
type OutboxRow = store.OutboxRow

// OutboxState is the state of an outbox row.
type OutboxState = store.OutboxState

// Outbox row states (see store.OutboxState).
const (
	OutboxPending     = store.OutboxPending
	OutboxSent        = store.OutboxSent
	OutboxQuarantined = store.OutboxQuarantined
	OutboxDiscarded   = store.OutboxDiscarded
)

// OutboxHealth is the outbox's backlog (part of RelayHealth).
type OutboxHealth = store.OutboxHealth

// KeyRecord is an idempotency key as stored.
type KeyRecord = store.KeyRecord

// KeyState is the state of an idempotency key.
type KeyState = store.KeyState

// Key states (see store.KeyState).
const (
	KeyStaged    = store.KeyStaged
	KeyInFlight  = store.KeyInFlight
	KeySucceeded = store.KeySucceeded
	KeyFailed    = store.KeyFailed
	KeyUnknown   = store.KeyUnknown
)

// KeyOutcome is what a call, or a reconciliation, found.
type KeyOutcome = store.KeyOutcome

// ErrInvalidName matches every error returned for a consumer name, table
// prefix, table or column name, or idempotency key that is not accepted.
var ErrInvalidName = store.ErrInvalidName

// MaxNameLen is the longest name, in bytes, accepted for a consumer, a
// table prefix or a composed table name (PostgreSQL would silently cut a
// longer one).
const MaxNameLen = store.MaxNameLen

// MaxKeyLen is the longest idempotency key accepted (Stripe's limit).
const MaxKeyLen = store.MaxKeyLen

// ValidateConsumer checks a consumer name: 1 to 63 bytes of ASCII letters,
// digits and the characters "_", "-", "." and ":".
func ValidateConsumer(s string) error { return store.ValidateConsumer(s) }

// ValidateKey checks an idempotency key: 1 to 255 bytes of printable ASCII
// without spaces.
func ValidateKey(key string) error { return store.ValidateKey(key) }
