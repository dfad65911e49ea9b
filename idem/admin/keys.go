package admin

import (
	"context"
	"time"

	"github.com/wary-go/wary/idem/keys"
)

// KeyFilter selects idempotency keys of one provider.
type KeyFilter struct {
	Provider string
	// States, if not empty, selects keys in one of these states.
	States []keys.State
	// Unresolved selects keys whose outcome is unknown: keys.Unknown, and
	// keys.InFlight with a lease that ended at At (zero: now).
	Unresolved bool
	At         time.Time
	// Limit, if positive, caps the number of keys.
	Limit int
}

// Keys lists the idempotency keys f selects, oldest first.
func (a *Admin) Keys(ctx context.Context, f KeyFilter) ([]keys.Record, error) {
	if f.At.IsZero() {
		f.At = time.Now()
	}
	return a.d.listKeys(ctx, f)
}
