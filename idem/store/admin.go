package store

import "context"

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
}
