package admin

import (
	"context"
	"time"
)

// EarlyAggregate is an aggregate whose early events an inbox holds in the
// store (idem.Options.Gaps), waiting for their predecessor.
type EarlyAggregate struct {
	Consumer    string
	AggregateID string
	// Awaited is the version the aggregate awaited when its latest early
	// event was held (its version then, plus one); 0 for events held
	// before the store recorded it.
	Awaited int64
	// FirstVersion and LastVersion are the lowest and highest versions
	// held; Held is how many events are held.
	FirstVersion, LastVersion int64
	Held                      int
	// OldestHeldAt is when the oldest of them was held: the inbox parks
	// them once it is older than its idem.Options.EarlyLimit.
	OldestHeldAt time.Time
}

// Early lists the aggregates that hold early events, of consumer or
// (consumer "") of every consumer, oldest hold first, at most limit of
// them (0: all). It changes nothing.
func (a *Admin) Early(ctx context.Context, consumer string, limit int) ([]EarlyAggregate, error) {
	return a.d.listEarly(ctx, consumer, limit)
}
