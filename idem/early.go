package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem/internal/seam"
)

// GapMode says what an inbox with version checks does with an event that
// arrives before its predecessor (a gap): see Options.Gaps.
type GapMode int

// Gap modes.
const (
	// GapsAuto holds gaps in the store (GapsHold) where the
	// subscription keeps no order per aggregate (its Ordering is
	// capability.OrderNone or capability.OrderQueue) and the store can hold them;
	// elsewhere it retries them through the broker (GapsRetry).
	GapsAuto GapMode = iota
	// GapsHold keeps an early event in the store, with its claim, and
	// acknowledges its delivery at once (ResultEarly). When its
	// predecessor is applied, the inbox applies it in the same
	// transaction, with the same handler, and then the next one held, in
	// version order. NewInbox refuses it for a store that cannot hold.
	GapsHold
	// GapsRetry nacks an early event with backoff and parks it after
	// Options.MaxAttempts attempts (ResultGapRetried, ResultParked): each
	// retry is a broker delivery.
	GapsRetry
)

// DefaultEarlyLimit is how long an early event waits for its predecessor
// by default (Options.EarlyLimit).
const DefaultEarlyLimit = time.Hour

// gapsHeld decides, in NewInbox, whether gaps are held: it returns the
// store's earlyStore part, or nil for broker retry.
func gapsHeld[Tx any](st inboxStore[Tx], o *Options, caps capability.Subscription) (earlyStore[Tx], error) {
	es, ok := st.(earlyStore[Tx])
	switch o.Gaps {
	case GapsRetry:
		return nil, nil
	case GapsHold:
		if !ok {
			return nil, fmt.Errorf("%w: Options.Gaps: the store %T cannot hold early events", broker.ErrInvalid, st)
		}
	case GapsAuto:
		if !ok || (caps.Ordering != capability.OrderNone && caps.Ordering != capability.OrderQueue) {
			return nil, nil
		}
	default:
		return nil, fmt.Errorf("%w: Options.Gaps: unknown mode %d", broker.ErrInvalid, o.Gaps)
	}
	if !o.hasVersions() {
		return nil, nil
	}
	return es, nil
}

// hold records d's event ev, found ahead of its aggregate's version cur
// (0: no row), as an early event in tx. It returns ResultEarly, or
// ResultParked when the aggregate's oldest early event is older than
// Options.EarlyLimit (then all of them are parked), or ResultStale when
// an early event of the same version is held already.
func (in *Inbox[Tx]) hold(ctx context.Context, tx Tx, d *broker.Delivery, ev Event, cur int64) (Result, error) {
	now := in.o.Now()
	m := d.Message
	held, oldest, err := in.early.HoldEarly(ctx, tx, &seam.EarlyEvent{Consumer: in.consumer, AggregateID: ev.AggregateID,
		Version: ev.Version, Awaited: cur + 1, MessageID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body, HeldAt: now})
	if err != nil {
		return 0, storeErr("hold early event", err)
	}
	if !held { // another message of this version waits already
		return ResultStale, nil
	}
	in.stats.early.Add(1)
	if now.Sub(oldest) < in.o.EarlyLimit {
		return ResultEarly, nil
	}
	reason := fmt.Sprintf("gap: aggregate %q at version %d, early events held since %s (Options.EarlyLimit %s)",
		ev.AggregateID, cur, oldest.UTC().Format(time.RFC3339), in.o.EarlyLimit)
	if err := in.parkEarly(ctx, tx, ev.AggregateID, reason); err != nil {
		return 0, err
	}
	return ResultParked, nil
}

// parkEarly moves the early events of aggregate to the park, in tx, with
// reason.
func (in *Inbox[Tx]) parkEarly(ctx context.Context, tx Tx, aggregate, reason string) error {
	es, err := in.early.TakeAllEarly(ctx, tx, in.consumer, aggregate)
	if err != nil {
		return storeErr("take early events", err)
	}
	now := in.o.Now()
	for i := range es {
		d := broker.NewDetachedDelivery(earlyMessage(&es[i]), 1)
		if err := in.store.Park(ctx, tx, parkedFrom(in.consumer, d, reason, 0, es[i].HeldAt, now)); err != nil {
			return storeErr("park early event", err)
		}
		in.stats.parked.Add(1)
	}
	in.o.Logger.Warn("idem: early events parked", slog.String("consumer", in.consumer), slog.String("aggregate_id", aggregate),
		slog.Int("events", len(es)), slog.String("reason", reason))
	return nil
}

func earlyMessage(e *seam.EarlyEvent) *broker.Message {
	return &broker.Message{ID: e.MessageID, Key: e.Key, Headers: e.Headers, Body: e.Body}
}

// heal applies, in tx, the early events that follow version v of
// aggregate, in version order, with h behind the version check: each
// deleted as it is applied, under a savepoint. A successor whose handler
// fails is left held (the savepoint undoes its work and its removal) and
// tx goes on: where tx has a run t (Handle's), it is recorded there, to be
// tried again after the commit (retryStalled); elsewhere (a replay) the
// aggregate's early events are parked, with the failure as the reason.
func (in *Inbox[Tx]) heal(ctx context.Context, tx Tx, aggregate string, v int64, table VersionTable, h Handler[Tx], t *txRun[Tx]) error {
	for {
		if err := in.early.Savepoint(ctx, tx); err != nil {
			return storeErr("savepoint", err)
		}
		e, err := in.early.TakeEarly(ctx, tx, in.consumer, aggregate, v+1)
		if err != nil {
			return storeErr("take early event", err)
		}
		if e == nil {
			return in.release(ctx, tx)
		}
		d := broker.NewDetachedDelivery(earlyMessage(e), 1)
		_, herr := in.call(ctx, tx, d, h, checks{table: table}, t)
		if herr != nil && errors.Is(herr, errStore) {
			return herr
		}
		if herr != nil {
			if err := in.early.RollbackTo(ctx, tx); err != nil {
				return storeErr("rollback to savepoint", err)
			}
		}
		if err := in.release(ctx, tx); err != nil {
			return err
		}
		if herr != nil {
			if t != nil {
				t.stalled = append(t.stalled, stall[Tx]{aggregate: aggregate, version: v, err: herr, table: table, h: h})
				return nil
			}
			reason := fmt.Sprintf("early event %q, version %d, failed when its predecessor was applied: %v", e.MessageID, e.Version, herr)
			return in.parkEarly(ctx, tx, aggregate, reason)
		}
		in.stats.earlyApplied.Add(1)
		v++
	}
}

func (in *Inbox[Tx]) release(ctx context.Context, tx Tx) error {
	if err := in.early.Release(ctx, tx); err != nil {
		return storeErr("release savepoint", err)
	}
	return nil
}

// earlyAttempts is how many attempts a held successor whose handler fails
// gets in all (the first in its predecessor's transaction, the others
// each in a transaction of its own right after it) before its aggregate's
// early events are parked.
const earlyAttempts = 3

// txRun is what the deliveries of one transaction share while it runs,
// handed down to their version checks with them (not through the
// handler's context, which is the user's): the aggregates whose locks the
// transaction took before its first handler ran (lockAggregates), which
// the checks need not take again, and the held successors whose handler
// failed in it (heal), to be tried again after its commit
// (retryStalled). A nil *txRun (a replay's) has neither: a successor that
// fails parks its aggregate.
type txRun[Tx any] struct {
	locked  map[string]bool
	stalled []stall[Tx]
}

// lockedIn reports whether t's transaction took the lock of aggregate
// already (lockAggregates).
func (t *txRun[Tx]) lockedIn(aggregate string) bool {
	return t != nil && t.locked[aggregate]
}

// stall is a held successor, of version+1, that failed with err; it runs
// again with h behind the version check of table.
type stall[Tx any] struct {
	aggregate string
	version   int64
	err       error
	table     VersionTable
	h         Handler[Tx]
}

// retryStalled tries again, after t's transaction committed, the held
// successors that stalled in it: each in a transaction of its own, up to
// earlyAttempts in all, and then parks its aggregate's early events.
// Successors that stall in these transactions are tried too.
func (in *Inbox[Tx]) retryStalled(ctx context.Context, t *txRun[Tx]) {
	if t == nil {
		return
	}
	list := t.stalled
	for len(list) > 0 {
		st := list[0]
		list = append(list[1:], in.retryStall(ctx, st)...)
	}
}

func (in *Inbox[Tx]) retryStall(ctx context.Context, st stall[Tx]) []stall[Tx] {
	last := st.err
	for attempt := 2; attempt <= earlyAttempts; attempt++ {
		inner := &txRun[Tx]{}
		tx, err := in.store.Begin(ctx)
		if err != nil {
			last = err
			continue
		}
		err = in.early.LockAggregate(ctx, tx, in.consumer, st.aggregate)
		var e *seam.EarlyEvent
		if err == nil {
			e, err = in.early.TakeEarly(ctx, tx, in.consumer, st.aggregate, st.version+1)
		}
		if err == nil && e == nil { // applied or parked meanwhile
			in.rollback(ctx, tx)
			return nil
		}
		if err == nil {
			_, err = in.call(ctx, tx, broker.NewDetachedDelivery(earlyMessage(e), attempt), st.h, checks{table: st.table, heal: true}, inner)
		}
		if err == nil {
			if err = in.commit(ctx, tx); err == nil {
				in.stats.earlyApplied.Add(1)
				return inner.stalled
			}
		} else {
			in.rollback(ctx, tx)
		}
		last = err
	}
	reason := fmt.Sprintf("early event of aggregate %q, version %d, failed %d times after its predecessor was applied: %v", st.aggregate, st.version+1, earlyAttempts, last)
	tx, err := in.store.Begin(ctx)
	if err == nil {
		if err = in.early.LockAggregate(ctx, tx, in.consumer, st.aggregate); err == nil {
			err = in.parkEarly(ctx, tx, st.aggregate, reason)
		}
		if err == nil {
			err = in.commit(ctx, tx)
		} else {
			in.rollback(ctx, tx)
		}
	}
	if err != nil && ctx.Err() == nil {
		in.o.Logger.Warn("idem: parking early events failed; they stay held until Options.EarlyLimit", slog.String("consumer", in.consumer),
			slog.String("aggregate_id", st.aggregate), slog.String("error", err.Error()))
	}
	return nil
}

// ExpireEarly parks the aggregates whose oldest early event waited longer
// than Options.EarlyLimit, with their early events, and returns how many
// events it parked. The inbox also does it by itself, when it holds
// another event of the aggregate and lazily as Handle runs (at most every
// EarlyLimit/4); call it where no deliveries come.
func (in *Inbox[Tx]) ExpireEarly(ctx context.Context) (int, error) {
	if in.early == nil {
		return 0, nil
	}
	total := 0
	for {
		before := in.o.Now().Add(-in.o.EarlyLimit)
		aggs, err := in.early.ExpiredEarly(ctx, in.consumer, before, 100)
		if err != nil {
			return total, fmt.Errorf("idem: expire early events: %w", err)
		}
		for _, a := range aggs {
			n, err := in.expireOne(ctx, a, before)
			total += n
			if err != nil {
				return total, fmt.Errorf("idem: expire early events: %w", err)
			}
		}
		if len(aggs) < 100 {
			return total, nil
		}
	}
}

// expireOne parks the early events of aggregate, in a transaction of its
// own.
func (in *Inbox[Tx]) expireOne(ctx context.Context, aggregate string, before time.Time) (int, error) {
	tx, err := in.store.Begin(ctx)
	if err != nil {
		return 0, err
	}
	parked := in.stats.parked.Load()
	err = in.early.LockAggregate(ctx, tx, in.consumer, aggregate)
	if err == nil {
		err = in.parkEarly(ctx, tx, aggregate, fmt.Sprintf("gap: early events of aggregate %q held since before %s (Options.EarlyLimit %s); their predecessor never came",
			aggregate, before.UTC().Format(time.RFC3339), in.o.EarlyLimit))
	}
	if err != nil {
		in.rollback(ctx, tx)
		return 0, err
	}
	return int(in.stats.parked.Load() - parked), in.commit(ctx, tx)
}

// expireDue runs ExpireEarly when it is due (every EarlyLimit/4, at least
// a second) and no other call is running it.
func (in *Inbox[Tx]) expireDue(ctx context.Context) {
	if in.early == nil {
		return
	}
	now := in.o.Now()
	if now.UnixNano() < in.nextExpire.Load() || !in.expiring.CompareAndSwap(false, true) {
		return
	}
	defer in.expiring.Store(false)
	if now.UnixNano() < in.nextExpire.Load() {
		return
	}
	in.nextExpire.Store(now.Add(max(in.o.EarlyLimit/4, time.Second)).UnixNano())
	if _, err := in.ExpireEarly(ctx); err != nil && ctx.Err() == nil {
		in.o.Logger.Warn("idem: expiring early events failed; retrying later", slog.String("consumer", in.consumer), slog.String("error", err.Error()))
	}
}
