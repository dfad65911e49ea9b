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

// Versioned returns a handler for versioned events (HeaderAggregateID and
// HeaderAggregateVersion) that checks each event's version against the
// consumer's state table (Store.CheckVersion) before it applies it, in the
// inbox transaction:
//
//   - VersionApplied: apply runs; an event of version 1 for an aggregate
//     without a row (VersionMissing) runs apply too, which creates it.
//     Handle reports ResultApplied.
//   - VersionStale (a duplicate or an older event): not applied; the
//     handler returns SkipStale, so the claim commits and Handle reports
//     ResultStale.
//   - VersionGap, and VersionMissing for versions above 1: the handler
//     returns a *ParkError, so the event is retried with backoff
//     (ResultGapRetried), then parked after Options.MaxAttempts attempts
//     (ResultParked); later events of the aggregate are held behind it
//     (ResultHeld, unless Options.NoHold) until an operator replays them
//     with in.Replay or in.ReplayAll and this handler.
//
// A message without valid event headers is rejected as permanent (dead-
// lettered where the broker can). Use the handler with Handle, HandleBatch,
// Wrap, WrapBatch, Replay and ReplayAll of in.
func (in *Inbox[Tx]) Versioned(table VersionTable, apply Apply[Tx]) (Handler[Tx], error) {
	if err := table.Validate(); err != nil {
		return nil, err
	}
	if apply == nil {
		return nil, fmt.Errorf("%w: nil apply function", broker.ErrInvalid)
	}
	return func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return in.checkVersion(ctx, tx, d, table, apply)
	}, nil
}

// checkVersion runs the version check for d in tx, then apply when it
// passes.
func (in *Inbox[Tx]) checkVersion(ctx context.Context, tx Tx, d *broker.Delivery, table VersionTable, apply Apply[Tx]) error {
	ev, err := ParseEvent(d.Message)
	if err == nil && ev.Version < 1 {
		err = fmt.Errorf("%w: message %q has no %s header", ErrNoEvent, d.Message.ID, HeaderAggregateVersion)
	}
	if err != nil {
		return broker.Permanent(err)
	}
	c, err := in.store.CheckVersion(ctx, tx, table, ev.AggregateID, ev.Version)
	if err != nil {
		return fmt.Errorf("idem: version check: %w", err)
	}
	st := &in.stats
	switch {
	case c.Result == VersionApplied, c.Result == VersionMissing && ev.Version == 1:
		if err := apply(ctx, tx, d, ev); err != nil {
			return err
		}
		st.applied.Add(1)
		return nil
	case c.Result == VersionStale:
		return SkipStale
	case c.Result == VersionMissing:
		st.gaps.Add(1)
		return &ParkError{Reason: fmt.Sprintf("missing aggregate: %q has no row, event version %d", ev.AggregateID, ev.Version)}
	default:
		st.gaps.Add(1)
		return &ParkError{Reason: fmt.Sprintf("gap: aggregate %q at version %d, event version %d", ev.AggregateID, c.Current, ev.Version)}
	}
}
