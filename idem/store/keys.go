package store

import (
	"context"
	"fmt"
	"time"
)

// KeyState is the state of an idempotency key.
type KeyState int

// Key states.
const (
	// KeyStaged: the key and intent are committed; the call was not
	// started.
	KeyStaged KeyState = iota
	// KeyInFlight: a call was started at LastCallAt and holds the key until
	// LeaseUntil. Past it, with no outcome recorded, the caller died
	// during the call (or after it, before recording): the outcome is
	// unknown.
	KeyInFlight
	// KeySucceeded: the provider did it; Result is its answer.
	KeySucceeded
	// KeyFailed: the provider refused for good (the call returned an error
	// marked with broker.Permanent); Error says why.
	KeyFailed
	// KeyUnknown: the call failed in a way that leaves the outcome open (a
	// timeout, a 5xx), and it may not be retried automatically.
	KeyUnknown
)

func (s KeyState) String() string {
	switch s {
	case KeyStaged:
		return "staged"
	case KeyInFlight:
		return "in flight"
	case KeySucceeded:
		return "succeeded"
	case KeyFailed:
		return "failed"
	case KeyUnknown:
		return "unknown"
	}
	return fmt.Sprintf("KeyState(%d)", int(s))
}

// KeyRecord is an idempotency key as stored.
type KeyRecord struct {
	Provider string
	Key      string
	// Intent is what the call is to do (the request, as the caller encodes
	// it), stored with the key.
	Intent   []byte
	State    KeyState
	Result   []byte
	Error    string
	Attempts int // calls started
	// CreatedAt is when the key was staged; FirstCallAt when the provider
	// could first have seen it (the start of the first call; zero if
	// none); LastCallAt the start of the latest call; LeaseUntil when an
	// in-flight call's hold ends; DoneAt when the outcome was recorded.
	CreatedAt, FirstCallAt, LastCallAt, LeaseUntil, DoneAt time.Time
}

// KeyOutcome is what a call, or a reconciliation, found.
type KeyOutcome struct {
	// State is KeySucceeded, KeyFailed or KeyUnknown; a reconciliation may
	// also say KeyStaged: the provider never saw the key, so it is safe to
	// call again (as if for the first time).
	State  KeyState
	Result []byte
	Error  string
}

// KeyFilter selects idempotency keys of one provider.
type KeyFilter struct {
	Provider string
	// States, if not empty, selects keys in one of these states.
	States []KeyState
	// Unresolved selects keys whose outcome is unknown: KeyUnknown, and
	// KeyInFlight with LeaseUntil not after At.
	Unresolved bool
	At         time.Time
	// Limit, if positive, caps the number of keys.
	Limit int
}

// KeyStore is the database side of idempotency keys. idem/postgres and
// idem/sqlite implement it.
type KeyStore[Tx any] interface {
	// StageKey inserts the key with its intent in tx, in state KeyStaged,
	// unless it exists. It returns the record and whether it inserted it.
	StageKey(ctx context.Context, tx Tx, provider, key string, intent []byte, at time.Time) (KeyRecord, bool, error)
	// GetKey reads a key.
	GetKey(ctx context.Context, provider, key string) (KeyRecord, bool, error)
	// StartKeyCall moves the key to KeyInFlight, counting one more attempt,
	// if it is still at attempts and staged, in flight or unknown (so that
	// two callers cannot both start the same call). It reports whether it
	// did.
	StartKeyCall(ctx context.Context, provider, key string, attempts int, at, leaseUntil time.Time) (bool, error)
	// FinishKeyCall records o for the key if it is still at attempts and in
	// flight or unknown, and reports whether it did. o.State KeyStaged
	// resets the key as never called.
	FinishKeyCall(ctx context.Context, provider, key string, attempts int, o KeyOutcome, at time.Time) (bool, error)
	// ListKeys lists keys matching f, oldest first.
	ListKeys(ctx context.Context, f KeyFilter) ([]KeyRecord, error)
	// PurgeKeys deletes at most limit succeeded or failed keys of provider
	// done before before, and returns how many.
	PurgeKeys(ctx context.Context, provider string, before time.Time, limit int) (int, error)
}
