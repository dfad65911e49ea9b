package store

import (
	"context"

	"github.com/wary-go/wary/idem/internal/seam"
)

// Admin is implemented by stores that serve the operator's command
// (cmd/wary) beyond what Store and RelayStore offer: finding the consumers
// that have parked messages, and giving a parked message back to the
// broker. idem/postgres and idem/sqlite implement it.
type Admin[Tx any] interface {
	// ParkedConsumers returns, for every consumer with parked messages,
	// how many it has.
	ParkedConsumers(ctx context.Context) (map[string]int, error)
	// Unclaim deletes, in tx, consumer's inbox record of messageID and its
	// failure record, so that a copy of the message delivered again is
	// processed instead of acknowledged as a duplicate. It reports whether
	// there was an inbox record.
	Unclaim(ctx context.Context, tx Tx, consumer, messageID string) (bool, error)
	// ListEarly lists the aggregates that hold early events (see idem.Options.EarlyLimit),
	// of consumer or (consumer "") of every consumer, oldest hold first,
	// at most limit of them (0: all). A store that cannot hold early
	// events returns none.
	ListEarly(ctx context.Context, consumer string, limit int) ([]seam.EarlyAggregate, error)
}
