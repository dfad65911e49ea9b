package idem

import (
	"context"
	"fmt"

	"github.com/wary-go/wary/broker"
)

// versioned returns h behind the version checks of Options.Versions (h
// itself where there are none), as the step that runs in d's transaction:
// the check runs before h, and h runs only for an event to apply. With
// hold, a gap is held as an early event when the inbox holds gaps
// (Options.Gaps); Replay passes false, so that a gap still open stops it.
// t is the transaction's run (nil: a replay's, which parks what stalls).
func (in *Inbox[Tx]) versioned(h Handler[Tx], hold bool, t *txRun[Tx]) step[Tx] {
	if !in.o.hasVersions() {
		return handlerStep(h)
	}
	return func(ctx context.Context, tx Tx, d *broker.Delivery) (Result, error) {
		return in.checkVersion(ctx, tx, d, in.o.Versions, h, hold, true, t)
	}
}

// checkVersion runs the version check for d in tx, then h when it
// passes, and then, with heal, where the inbox holds gaps, the early
// events that follow d's (heal, which records in t those whose handler
// fails). It returns what it did: ResultApplied (h ran), ResultStale (the
// check, or h with SkipStale, found d stale), ResultEarly or ResultParked
// (the check held d as an early event, see hold).
func (in *Inbox[Tx]) checkVersion(ctx context.Context, tx Tx, d *broker.Delivery, table VersionTable, h Handler[Tx], hold, heal bool, t *txRun[Tx]) (Result, error) {
	ev, r, err := in.version(ctx, tx, d, table, hold, heal, t)
	if err != nil || r != 0 {
		return r, err
	}
	if r, err := handlerStep(h)(ctx, tx, d); err != nil || r != ResultApplied {
		return r, err
	}
	in.stats.applied.Add(1)
	if in.early != nil && heal {
		if err := in.heal(ctx, tx, ev.AggregateID, ev.Version, table, h, t); err != nil {
			return 0, err
		}
	}
	return ResultApplied, nil
}

// version runs the version check for d in tx. It returns d's event and no
// result when the event is to be applied; ResultStale for a stale one; for
// a gap or a missing aggregate ResultEarly (or ResultParked) when it held
// the event (hold, and the inbox holds gaps: see Inbox.hold), a *ParkError
// otherwise; a permanent error for a message without valid event headers;
// and any other error for a failed check. With lock (or hold), where the
// inbox holds gaps, it locks the aggregate first, unless t took its lock
// already (heal's successors are locked already).
func (in *Inbox[Tx]) version(ctx context.Context, tx Tx, d *broker.Delivery, table VersionTable, hold, lock bool, t *txRun[Tx]) (Event, Result, error) {
	ev, err := ParseEvent(d.Message)
	if err == nil && ev.Version < 1 {
		err = fmt.Errorf("%w: message %q has no %s header", ErrNoEvent, d.Message.ID, HeaderAggregateVersion)
	}
	if err != nil {
		return ev, 0, broker.Permanent(err)
	}
	hold = hold && in.early != nil
	if in.early != nil && (hold || lock) && !t.lockedIn(ev.AggregateID) {
		// Taken before the check, and held until tx ends: a transaction
		// that applies the predecessor and one that holds this event see
		// each other's work (see earlyStore.LockAggregate). A shared
		// transaction took it before its first handler ran, with the
		// locks of its other aggregates, in the store's one order
		// (lockAggregates).
		if err := in.early.LockAggregate(ctx, tx, in.consumer, ev.AggregateID); err != nil {
			return ev, 0, storeErr("lock aggregate", err)
		}
	}
	c, err := in.store.CheckVersion(ctx, tx, table, ev.AggregateID, ev.Version)
	if err != nil {
		return ev, 0, fmt.Errorf("idem: version check: %w", err)
	}
	switch {
	case c.Result == VersionApplied, c.Result == VersionMissing && ev.Version == 1:
		return ev, 0, nil
	case c.Result == VersionStale:
		return ev, ResultStale, nil
	}
	in.stats.gaps.Add(1)
	if hold {
		r, err := in.hold(ctx, tx, d, ev, c.Current)
		return ev, r, err
	}
	if c.Result == VersionMissing {
		return ev, 0, &ParkError{Reason: fmt.Sprintf("missing aggregate: %q has no row, event version %d", ev.AggregateID, ev.Version)}
	}
	return ev, 0, &ParkError{Reason: fmt.Sprintf("gap: aggregate %q at version %d, event version %d", ev.AggregateID, c.Current, ev.Version)}
}
