package idem

import (
	"context"
	"fmt"

	"github.com/wary-go/wary/broker"
)

// Apply applies an event's effect, inside the inbox transaction, after its
// version check passed. For the event that creates an aggregate (version 1,
// no row yet) it must insert the row with version 1; for later events the
// version column is already updated, and it writes the rest of the state.
type Apply[Tx any] func(ctx context.Context, tx Tx, d *broker.Delivery, ev Event) error

// Versioned applies versioned events (HeaderAggregateID and
// HeaderAggregateVersion) through an inbox, with a version check on the
// consumer's state table:
//
//   - VersionApplied: apply runs; an event of version 1 for an aggregate
//     without a row (VersionMissing) runs apply too, which creates it.
//   - VersionStale (a duplicate or an older event): acknowledged, not applied.
//   - VersionGap, and VersionMissing for versions above 1: retried with
//     backoff, then parked after Options.MaxAttempts attempts; later events
//     of the aggregate are held behind it (unless Options.NoHold) until an
//     operator replays them with Replay.
//
// A message without valid event headers is rejected as permanent (dead-
// lettered where the broker can).
type Versioned[Tx any] struct {
	in    *Inbox[Tx]
	table VersionTable
	apply Apply[Tx]
}

// NewVersioned returns a versioned processor on in for table.
func NewVersioned[Tx any](in *Inbox[Tx], table VersionTable, apply Apply[Tx]) (*Versioned[Tx], error) {
	if err := table.Validate(); err != nil {
		return nil, err
	}
	if apply == nil {
		return nil, fmt.Errorf("idem: nil apply function")
	}
	return &Versioned[Tx]{in: in, table: table, apply: apply}, nil
}

// Inbox returns the inbox v runs on.
func (v *Versioned[Tx]) Inbox() *Inbox[Tx] { return v.in }

// Handle processes d through the inbox with the version check (Inbox.Handle
// with Handler()).
func (v *Versioned[Tx]) Handle(ctx context.Context, d *broker.Delivery) error {
	return v.in.Handle(ctx, d, v.Handler())
}

// HandleBatch processes ds in one transaction (Inbox.HandleBatch).
func (v *Versioned[Tx]) HandleBatch(ctx context.Context, ds []*broker.Delivery) error {
	return v.in.HandleBatch(ctx, ds, v.Handler())
}

// BrokerHandler adapts v to broker.Subscription.Run.
func (v *Versioned[Tx]) BrokerHandler() broker.Handler { return v.in.Handler(v.Handler()) }

// Replay replays the parked events of one aggregate in version order (see
// Inbox.Replay). Stale copies are dropped; the replay stops at a gap that
// is still open.
func (v *Versioned[Tx]) Replay(ctx context.Context, aggregateID string) (ReplayResult, error) {
	return v.in.Replay(ctx, aggregateID, v.Handler())
}

// ReplayAll replays every aggregate with parked events (Inbox.ReplayAll).
func (v *Versioned[Tx]) ReplayAll(ctx context.Context) (map[string]ReplayResult, error) {
	return v.in.ReplayAll(ctx, v.Handler())
}

// Handler returns the inbox handler that checks the version and applies.
func (v *Versioned[Tx]) Handler() Handler[Tx] {
	return func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		_, err := v.check(ctx, tx, d)
		return err
	}
}

// check runs the version check for d in tx, then apply when it passes.
func (v *Versioned[Tx]) check(ctx context.Context, tx Tx, d *broker.Delivery) (VersionResult, error) {
	ev, err := ParseEvent(d.Message)
	if err == nil && ev.Version < 1 {
		err = fmt.Errorf("%w: message %q has no %s header", ErrNoEvent, d.Message.ID, HeaderAggregateVersion)
	}
	if err != nil {
		return 0, broker.Permanent(err)
	}
	c, err := v.in.store.CheckVersion(ctx, tx, v.table, ev.AggregateID, ev.Version)
	if err != nil {
		return 0, fmt.Errorf("idem: version check: %w", err)
	}
	st := &v.in.stats
	switch {
	case c.Result == VersionApplied, c.Result == VersionMissing && ev.Version == 1:
		if err := v.apply(ctx, tx, d, ev); err != nil {
			return c.Result, err
		}
		st.applied.Add(1)
		return VersionApplied, nil
	case c.Result == VersionStale:
		st.stale.Add(1)
		return c.Result, nil
	case c.Result == VersionMissing:
		st.gaps.Add(1)
		return c.Result, &ParkError{Reason: fmt.Sprintf("missing aggregate: %q has no row, event version %d", ev.AggregateID, ev.Version)}
	default:
		st.gaps.Add(1)
		return c.Result, &ParkError{Reason: fmt.Sprintf("gap: aggregate %q at version %d, event version %d", ev.AggregateID, c.Current, ev.Version)}
	}
}
