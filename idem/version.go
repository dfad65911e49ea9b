package idem

import (
	"context"
	"fmt"

	"github.com/wary-go/wary/broker"
)

// versioned returns h behind the version checks of Options.Versions (h
// itself where there are none): the check runs in the inbox transaction
// before h, and h runs only for an event to apply. With hold, a gap is
// held as an early event when the inbox holds gaps (Options.Gaps);
// Replay passes false, so that a gap still open stops it.
func (in *Inbox[Tx]) versioned(h Handler[Tx], hold bool) Handler[Tx] {
	if !in.o.hasVersions() {
		return h
	}
	return func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return in.checkVersion(ctx, tx, d, in.o.Versions, h, hold, true)
	}
}

// checkVersion runs the version check for d in tx, then h when it
// passes, and then, where the inbox holds gaps, the early events that
// follow d's (with heal).
func (in *Inbox[Tx]) checkVersion(ctx context.Context, tx Tx, d *broker.Delivery, table VersionTable, h Handler[Tx], hold, heal bool) error {
	ev, err := in.version(ctx, tx, d, table, hold, heal)
	if err != nil {
		return err
	}
	if err := h(ctx, tx, d); err != nil {
		return err
	}
	in.stats.applied.Add(1)
	if in.early != nil && heal {
		return in.heal(ctx, tx, ev.AggregateID, ev.Version, table, h)
	}
	return nil
}

// version runs the version check for d in tx. It returns d's event and nil
// when the event is to be applied; SkipStale for a stale one; for a gap or
// a missing aggregate errEarly (or errEarlyParked) when it held the event
// (hold, and the inbox holds gaps), a *ParkError otherwise; a permanent
// error for a message without valid event headers; and any other error
// for a failed check. With lock (or hold), where the inbox holds gaps, it
// locks the aggregate first (heal's successors are locked already).
func (in *Inbox[Tx]) version(ctx context.Context, tx Tx, d *broker.Delivery, table VersionTable, hold, lock bool) (Event, error) {
	ev, err := ParseEvent(d.Message)
	if err == nil && ev.Version < 1 {
		err = fmt.Errorf("%w: message %q has no %s header", ErrNoEvent, d.Message.ID, HeaderAggregateVersion)
	}
	if err != nil {
		return ev, broker.Permanent(err)
	}
	hold = hold && in.early != nil
	if in.early != nil && (hold || lock) && !lockedIn(ctx, ev.AggregateID) {
		// Taken before the check, and held until tx ends: a transaction
		// that applies the predecessor and one that holds this event see
		// each other's work (see earlyStore.LockAggregate). A shared
		// transaction took it before its first handler ran, with the
		// locks of its other aggregates, in the store's one order
		// (lockAggregates).
		if err := in.early.LockAggregate(ctx, tx, in.consumer, ev.AggregateID); err != nil {
			return ev, storeErr("lock aggregate", err)
		}
	}
	c, err := in.store.CheckVersion(ctx, tx, table, ev.AggregateID, ev.Version)
	if err != nil {
		return ev, fmt.Errorf("idem: version check: %w", err)
	}
	switch {
	case c.Result == VersionApplied, c.Result == VersionMissing && ev.Version == 1:
		return ev, nil
	case c.Result == VersionStale:
		return ev, SkipStale
	}
	in.stats.gaps.Add(1)
	if hold {
		return ev, in.hold(ctx, tx, d, ev, c.Current)
	}
	if c.Result == VersionMissing {
		return ev, &ParkError{Reason: fmt.Sprintf("missing aggregate: %q has no row, event version %d", ev.AggregateID, ev.Version)}
	}
	return ev, &ParkError{Reason: fmt.Sprintf("gap: aggregate %q at version %d, event version %d", ev.AggregateID, c.Current, ev.Version)}
}
