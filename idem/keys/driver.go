package keys

import (
	"context"
	"time"
)

// keyStore is what a Caller calls of a store: the database side of
// idempotency keys, declared here where it is called; a store's Driver
// implements it (New asserts it).
type keyStore[Tx any] interface {
	// StageKey inserts the key with its intent in tx, in state Staged,
	// unless it exists. It returns the record and whether it inserted it.
	StageKey(ctx context.Context, tx Tx, provider, key string, intent []byte, at time.Time) (Record, bool, error)
	// GetKey reads a key.
	GetKey(ctx context.Context, provider, key string) (Record, bool, error)
	// StartKeyCall moves the key to InFlight, counting one more attempt,
	// if it is still at attempts and staged, in flight or unknown (so that
	// two callers cannot both start the same call). It reports whether it
	// did.
	StartKeyCall(ctx context.Context, provider, key string, attempts int, at, leaseUntil time.Time) (bool, error)
	// FinishKeyCall records o for the key if it is still at attempts and in
	// flight or unknown, and reports whether it did. o.State Staged
	// resets the key as never called.
	FinishKeyCall(ctx context.Context, provider, key string, attempts int, o Outcome, at time.Time) (bool, error)
	// ListKeys lists keys matching f, oldest first.
	ListKeys(ctx context.Context, f Filter) ([]Record, error)
	// PurgeKeys deletes at most limit succeeded or failed keys of provider
	// done before before, and returns how many.
	PurgeKeys(ctx context.Context, provider string, before time.Time, limit int) (int, error)
}
