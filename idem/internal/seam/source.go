package seam

import (
	"context"
	"log/slog"
	"time"
)

// The outbox's side of the seam: what a relay's source hands out and is
// told (the source's interface is declared by idem/outbox, which calls it),
// and the listing filter and stream status of the operator's side.

// SourceConfig is what a relay tells the source it opens.
type SourceConfig struct {
	// Owner names the relay (distinct for relays sharing a store).
	Owner string
	// BatchSize is the most rows of one batch.
	BatchSize int
	// PollInterval is how often the source looks for rows when nothing
	// woke it, and how soon it tries again after a failure.
	PollInterval time.Duration
	// Now is the relay's clock, Logger its logger.
	Now    func() time.Time
	Logger *slog.Logger
	// Note records a failure of the source's own work (a claim, a
	// listener, a stream) as the relay's last error; the source retries.
	Note func(op string, err error)
	// Woken returns a channel closed by the relay's next Wake (a producer
	// committed rows), and Changed one closed by its next Requeue or
	// Discard (rows the source left in the table may flow again).
	Woken, Changed func() <-chan struct{}
}

// Source hands a relay batches of committed rows of type R (outbox.Row:
// this package cannot name it, as outbox imports this package). Its methods are safe for
// concurrent use; it runs its own goroutines (claim loops, a listener, a
// stream) between Next and Close. A source guarantees:
//   - each aggregate's rows come in sequence order, in one batch and
//     across batches;
//   - no aggregate is in two live batches (handed out and not settled);
//   - a batch whose claim is lost (a lease run out, a stream gone) ends
//     its Lost context, and its Settle then fails with outbox.ErrLeaseLost or
//     records nothing: its rows come again.
type Source[R any] interface {
	// Next returns the next batch. With wait, it waits until rows are due
	// (or ctx is done: nil, ctx's error); the source decides how many
	// batches may be live at once, and Next waits while that many are.
	// Without wait it returns a batch of the rows due now, or nil when
	// none is (RunOnce, Drain).
	Next(ctx context.Context, wait bool) (*Batch[R], error)
	// Settle ends b: out's rows were published (Sent) or failed (Failed);
	// the other rows of b stay unsent. A nil out releases b recording
	// nothing (a relay that crashed after publishing): its rows come again.
	Settle(ctx context.Context, b *Batch[R], out *Outcome) error
	// State reports what the source does now.
	State() SourceState
	// Close stops the source's goroutines and gives up what it holds (a
	// lease, a stream), once every batch was settled.
	Close(ctx context.Context) error
}

// Batch is a set of rows handed to a relay by Source.Next.
type Batch[R any] struct {
	// Rows are the batch's rows, each aggregate's in sequence order.
	Rows []R
	// Lost, if not nil, is done once the batch's claim is lost: the relay
	// stops publishing it. A context rather than a channel, so that the
	// relay can tie its publish to it without a goroutine of its own.
	Lost context.Context
	// Handle is the source's own.
	Handle any
}

// Outcome is what a relay did with a batch.
type Outcome struct {
	// Sent are the rows published; Failed those that failed.
	Sent   []int64
	Failed []OutboxFailure
	// At is when (the relay's clock).
	At time.Time
}

// SourceState is a source's state, for the relay's stats.
type SourceState struct {
	// Kind is "poll" or "stream".
	Kind string
	// Listening reports whether the store wakes the source when rows are
	// committed (PostgreSQL: an open LISTEN connection).
	Listening bool
	// Streaming reports whether the source streams from the database's
	// log, and Standby whether it waits while another relay does (or, for
	// a polling source, while the outbox is streamed).
	Streaming, Standby bool
	// Idle counts the times the source found nothing to do and went to
	// wait.
	Idle int64
	// Released counts the times the source dropped its stream's slot
	// because it retained more log than the store's WAL budget (it then
	// polls, and streams again from a new slot); ReleasedAt is the last.
	Released   int64
	ReleasedAt time.Time
}

// OutboxFailure is one failed publish.
type OutboxFailure struct {
	RowID       int64
	Error       string
	NextAttempt time.Time
	Quarantine  bool
}
