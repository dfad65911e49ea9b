package outbox

import (
	"context"
	"fmt"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/internal/wotel"
)

// ErrInvalidMessage matches the error Outbox.Add returns for a message it
// refuses: what a relay would not publish (a message ID that
// driver.ValidateID refuses, such as one of only white space; an aggregate
// ID that is empty or only white space; a negative version; a header that
// driver.ValidateHeaders refuses or that the relay writes itself; text
// that is not UTF-8). A row that breaks the same rules in the table
// (another writer's) is quarantined by the relay with an error matching
// it. Errors of the broker's rules match broker.ErrInvalid too.
var ErrInvalidMessage = check.ErrOutboxMessage

// Outbox adds messages to the outbox inside the caller's transaction.
type Outbox[Tx any] struct {
	store  outboxStore[Tx]
	o      Options
	tracer wotel.Tracer
}

// Options configures an Outbox. Nil means defaults.
type Options struct {
	// Telemetry's Now stamps added rows, and its TracerProvider receives
	// the "create" span of each added message, whose context is stored
	// with the row (see the package doc, Telemetry). Add logs nothing and
	// reports no metrics.
	broker.Telemetry
}

// New returns an outbox on s, the store that also runs the
// caller's transactions.
func New[Tx any](s idem.Store[Tx], opts *Options) (*Outbox[Tx], error) {
	st, err := check.Part[outboxStore[Tx]](s, "the outbox's part")
	if err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	t := &o.Telemetry
	wotel.Defaults(&t.Logger, &t.TracerProvider, &t.MeterProvider, &t.Now)
	return &Outbox[Tx]{store: st, o: o, tracer: wotel.NewTracer(o.TracerProvider)}, nil
}

// Add writes msgs to the outbox in tx, the transaction that also writes the
// domain change they announce, and returns their per-aggregate sequences.
// Messages with an empty ID get one (written back into msgs). The rows
// become visible to the relay when tx commits, and vanish with it if it
// rolls back. Add validates every message first and writes nothing if one
// is invalid (ErrInvalidMessage).
//
// Add locks each aggregate's sequence counter until tx ends, so keep
// transactions that add to a busy aggregate short; messages of one call are
// locked in aggregate order, and transactions that add to several
// aggregates in different orders across calls can deadlock (the database
// aborts one).
func (o *Outbox[Tx]) Add(ctx context.Context, tx Tx, msgs ...*Message) ([]int64, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	rows := make([]Message, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return nil, fmt.Errorf("%w: nil message", ErrInvalidMessage)
		}
		rows[i] = *m
		if m.ID == "" {
			rows[i].ID = broker.NewID()
		}
		if err := check.OutboxMessage(rows[i].ID, rows[i].AggregateID, rows[i].Version, rows[i].Type, rows[i].Headers); err != nil {
			return nil, err
		}
	}
	for i, m := range msgs {
		m.ID = rows[i].ID
	}
	end := startAdd(ctx, o.tracer, rows)
	seqs, err := o.store.AddOutbox(ctx, tx, rows, o.o.Now())
	end(err)
	if err != nil {
		return nil, fmt.Errorf("idem: outbox add: %w", err)
	}
	return seqs, nil
}
