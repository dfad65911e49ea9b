package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/store"
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
	in.versioned.Store(true)
	return func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return in.checkVersion(ctx, tx, d, table, apply)
	}, nil
}

// checkVersion runs the version check for d in tx, then apply when it
// passes.
func (in *Inbox[Tx]) checkVersion(ctx context.Context, tx Tx, d *broker.Delivery, table VersionTable, apply Apply[Tx]) error {
	ev, err := in.version(ctx, tx, d, table)
	if err != nil {
		return err
	}
	if err := apply(ctx, tx, d, ev); err != nil {
		return err
	}
	in.stats.applied.Add(1)
	return nil
}

// version runs the version check for d in tx. It returns d's event and nil
// when the event is to be applied; SkipStale for a stale one; a *ParkError
// for a gap or a missing aggregate; a permanent error for a message without
// valid event headers; and any other error for a failed check.
func (in *Inbox[Tx]) version(ctx context.Context, tx Tx, d *broker.Delivery, table VersionTable) (Event, error) {
	ev, err := ParseEvent(d.Message)
	if err == nil && ev.Version < 1 {
		err = fmt.Errorf("%w: message %q has no %s header", ErrNoEvent, d.Message.ID, HeaderAggregateVersion)
	}
	if err != nil {
		return ev, broker.Permanent(err)
	}
	sc, err := in.store.CheckVersion(ctx, tx, store.VersionTable(table), ev.AggregateID, ev.Version)
	c := versionCheck(sc)
	if err != nil {
		return ev, fmt.Errorf("idem: version check: %w", err)
	}
	switch {
	case c.Result == VersionApplied, c.Result == VersionMissing && ev.Version == 1:
		return ev, nil
	case c.Result == VersionStale:
		return ev, SkipStale
	case c.Result == VersionMissing:
		in.stats.gaps.Add(1)
		return ev, &ParkError{Reason: fmt.Sprintf("missing aggregate: %q has no row, event version %d", ev.AggregateID, ev.Version)}
	default:
		in.stats.gaps.Add(1)
		return ev, &ParkError{Reason: fmt.Sprintf("gap: aggregate %q at version %d, event version %d", ev.AggregateID, c.Current, ev.Version)}
	}
}

// ApplyBatch applies the effects of events, inside the inbox transaction,
// after their version checks passed: evs[i] is the event of ds[i]. It
// follows Apply's rules for each event, and may write them all with one
// statement.
type ApplyBatch[Tx any] func(ctx context.Context, tx Tx, ds []*broker.Delivery, evs []Event) error

// VersionedBatch is Versioned for HandleBatchAll: the returned BatchHandler
// checks the version of every delivery it is given (one Store.CheckVersion
// each, in the order received, so that consecutive versions of an
// aggregate in one batch pass), then calls apply once with the events that
// passed. A stale event is reported as stale (ResultStale); a gap or a
// missing aggregate, and a message without valid event headers, fail that
// delivery alone (retried then parked, or dead-lettered), and the rest of
// the batch is tried again without it.
func (in *Inbox[Tx]) VersionedBatch(table VersionTable, apply ApplyBatch[Tx]) (BatchHandler[Tx], error) {
	if err := table.Validate(); err != nil {
		return nil, err
	}
	if apply == nil {
		return nil, fmt.Errorf("%w: nil apply function", broker.ErrInvalid)
	}
	in.versioned.Store(true)
	return func(ctx context.Context, tx Tx, ds []*broker.Delivery) error {
		var (
			keep    []*broker.Delivery
			evs     []Event
			skipped []error
			failed  []error
		)
		for _, d := range ds {
			ev, err := in.version(ctx, tx, d, table)
			switch {
			case err == nil:
				keep, evs = append(keep, d), append(evs, ev)
			case errors.Is(err, SkipStale):
				skipped = append(skipped, &DeliveryError{Delivery: d, Err: err})
			case broker.IsPermanent(err), errors.As(err, new(*ParkError)):
				failed = append(failed, &DeliveryError{Delivery: d, Err: err})
			default:
				return err
			}
		}
		if len(failed) > 0 {
			return errors.Join(failed...)
		}
		if len(keep) > 0 {
			if err := apply(ctx, tx, keep, evs); err != nil {
				return err
			}
			in.stats.applied.Add(int64(len(keep)))
		}
		return errors.Join(skipped...)
	}, nil
}
