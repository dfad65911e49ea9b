package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
)

// What an Outbox and a Relay call of a store, declared here, where they are
// called: a store's Driver implements them (New and NewRelay assert it).

// outboxStore is an Outbox's part of a store, for transactions of type Tx.
type outboxStore[Tx any] interface {
	// AddOutbox inserts msgs in tx and returns their per-aggregate
	// sequences. Each message gets the next sequence of its aggregate,
	// assigned under a lock on the aggregate's counter row that tx holds
	// until it ends: a transaction adding to the same aggregate waits, so
	// sequences of one aggregate commit in order, and a rollback returns
	// its sequences to be reused (no gaps). msgs are valid (see Outbox.Add).
	AddOutbox(ctx context.Context, tx Tx, msgs []Message, at time.Time) ([]int64, error)
}

// relayStore is a Relay's part of a store: the source it publishes from,
// and the operator's side of the outbox (listing rows, moving them between
// states, the backlog, and purging sent rows), which the Relay's
// Quarantined, Requeue, Discard, Health and Purge call. The store chooses
// the source's kind and holds its settings (claims from the table, a
// lease, the database's log); the relay only takes batches, publishes them
// and settles them.
type relayStore interface {
	// OutboxSource opens the source a relay publishes from. A source that
	// finds the outbox served by a source of another kind (a relay streams
	// from the log, and this one would poll the table) reports it from
	// Next, as an error matching ErrOtherSource.
	OutboxSource(ctx context.Context, c seam.SourceConfig) (seam.Source[Row], error)
	// OutboxHealth reports the backlog as of now.
	OutboxHealth(ctx context.Context, now time.Time) (Health, error)
	// ListOutbox lists rows matching f, in row order.
	ListOutbox(ctx context.Context, f Filter) ([]Row, error)
	// SetOutboxState moves the row with the given ID from one of from to
	// to (requeue: quarantined to pending with attempts reset; discard: to
	// discarded) and reports whether it did.
	SetOutboxState(ctx context.Context, rowID int64, to State, at time.Time, from ...State) (bool, error)
	// PurgeOutbox deletes at most limit sent or discarded rows marked
	// before before, and returns how many.
	PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error)
}

// streamStatuser is implemented by stores whose relays can stream the
// outbox from the database's log (PostgreSQL: logical replication): the
// relay reports the stream's lag from it.
type streamStatuser interface {
	// OutboxStreamStatus reports the stream's position on the server.
	OutboxStreamStatus(ctx context.Context) (StreamStatus, error)
}

// ErrOtherSource is returned by a polling source's Next when the outbox
// is served by a source of another kind: a
// relay streams it from the database's log (or its slot exists, and a
// streaming relay will resume from it), so a polling relay would publish
// rows twice. A relay's Run stands by while Next reports it (an error
// opening the source ends Run); RunOnce and Drain return it.
var ErrOtherSource = errors.New("idem: the outbox is served by a source of another kind")

// ErrLeaseLost is returned by the Settle of a source that claims by lease
// when the lease ran out or another relay took it, and by a relay
// whose batch's Lost context ended (a lease, a stream gone): nothing was
// marked, and the rows will be published again.
var ErrLeaseLost = errors.New("idem: the batch's claim was lost; nothing marked")
