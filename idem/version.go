package idem

import (
	"context"
	"fmt"

	"github.com/wary-go/wary/broker"
)

// checks says which version checks run before a handler: none (the zero
// value), or those of table; with hold, a gap is held as an early event
// where the inbox holds gaps (Options.Gaps), and with heal the early events
// that follow an applied event are applied after it (heal).
type checks struct {
	table      VersionTable
	hold, heal bool
}

// checks are the inbox's version checks (Options.Versions; none without),
// which apply the early events that follow; with hold, gaps are held.
// Handle holds; Replay does not, so that a gap still open stops it.
func (in *Inbox[Tx]) checks(hold bool) checks {
	if !in.o.hasVersions() {
		return checks{}
	}
	return checks{table: in.o.Versions, hold: hold, heal: true}
}

// checkVersion runs the version check c for d in tx, then h when it
// passes, and then, with c.heal, where the inbox holds gaps, the early
// events that follow d's (heal, which records in t those whose handler
// fails). It returns what it did: ResultApplied (h ran), ResultStale (the
// check, or h with SkipStale, found d stale), ResultEarly or ResultParked
// (the check held d as an early event, see hold).
func (in *Inbox[Tx]) checkVersion(ctx context.Context, tx Tx, d *broker.Delivery, c checks, h Handler[Tx], t *txRun[Tx]) (Result, error) {
	ev, r, err := in.version(ctx, tx, d, c.table, c.hold, c.heal, t)
	if err != nil || r != 0 {
		return r, err
	}
	if r, err := result(h(ctx, tx, d)); err != nil || r != ResultApplied {
		return r, err
	}
	in.stats.applied.Add(1)
	if in.early != nil && c.heal {
		if err := in.heal(ctx, tx, ev.AggregateID, ev.Version, c.table, h, t); err != nil {
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
