package idem

import (
	"context"
	"fmt"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/store"
)

// versioned returns h behind the version checks of Options.Versions (h
// itself where there are none): the check runs in the inbox transaction
// before h, and h runs only for an event to apply.
func (in *Inbox[Tx]) versioned(h Handler[Tx]) Handler[Tx] {
	if !in.o.hasVersions() {
		return h
	}
	return func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return in.checkVersion(ctx, tx, d, in.o.Versions, h)
	}
}

// checkVersion runs the version check for d in tx, then h when it
// passes.
func (in *Inbox[Tx]) checkVersion(ctx context.Context, tx Tx, d *broker.Delivery, table VersionTable, h Handler[Tx]) error {
	if _, err := in.version(ctx, tx, d, table); err != nil {
		return err
	}
	if err := h(ctx, tx, d); err != nil {
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
