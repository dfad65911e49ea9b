package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem/internal/seam"
)

// fail settles d after its handler failed with herr (the transaction is
// already rolled back). A body the handler could not decode
// (broker.ErrUndecodable) and a message without a valid event identity
// (ErrNoEvent: the version checks', or a handler's that reads the event
// with ParseEvent) are poison: no retry can fix them.
func (in *Inbox[Tx]) fail(ctx context.Context, d *broker.Delivery, herr error) (Result, error) {
	var pe *ParkError
	if errors.As(herr, &pe) {
		return in.parkOrRetry(ctx, d, pe)
	}
	if errors.Is(herr, broker.ErrUndecodable) || errors.Is(herr, ErrNoEvent) {
		return in.poison(ctx, d, herr)
	}
	in.stats.failed.Add(1)
	herr = fmt.Errorf("idem: consumer %q, message %q, attempt %d: %w", in.consumer, d.Message.ID, d.Attempt, herr)
	if broker.IsPermanent(herr) && in.caps.DeadLetter {
		sctx := settleCtx(ctx)
		if err := d.DeadLetter(sctx, herr.Error()); err != nil {
			return ResultDeadLettered, errors.Join(herr, err)
		}
		return ResultDeadLettered, herr
	}
	if err := d.Retry(ctx, d.Attempt); err != nil {
		return ResultFailed, errors.Join(herr, err)
	}
	return ResultFailed, herr
}

// conflictRetries is how many times the inbox tries a transaction again
// at once after it failed only because of a concurrent one (see
// retryConflict).
const conflictRetries = 3

// retryConflict reports whether the transaction that failed with err,
// after tried such failures before, is to be tried again at once, without
// a nack: err is a conflict with a concurrent transaction
// (conflicts), tried is below conflictRetries and ctx is not done.
// It counts the retry in Stats.Conflicts.
func (in *Inbox[Tx]) retryConflict(ctx context.Context, err error, tried int) bool {
	if in.conflicts == nil || tried >= conflictRetries || ctx.Err() != nil || !in.conflicts.Conflict(err) {
		return false
	}
	in.stats.conflicts.Add(1)
	return true
}

// abort nacks deliveries after a store failure.
func (in *Inbox[Tx]) abort(ctx context.Context, ds []*broker.Delivery, err error) error {
	if ctx.Err() == nil {
		in.stats.storeErrors.Add(1)
	}
	errs := []error{err}
	for _, d := range ds {
		if nerr := d.Retry(ctx, d.Attempt); nerr != nil {
			errs = append(errs, nerr)
		}
	}
	return errors.Join(errs...)
}

// parkOrRetry counts a failed attempt and parks the message once it had
// MaxAttempts of them (at once with pe.Now).
func (in *Inbox[Tx]) parkOrRetry(ctx context.Context, d *broker.Delivery, pe *ParkError) (Result, error) {
	now := in.o.Now()
	attempts, first := 1, now
	if !pe.Now {
		var err error
		attempts, first, err = in.store.RecordFailure(ctx, in.consumer, d.Message.ID, driver.BoundReason(pe.Reason), now)
		if err != nil {
			return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, storeErr("record failure", err))
		}
		attempts = max(attempts, d.Attempt)
		if attempts < in.o.MaxAttempts {
			in.stats.retried.Add(1)
			rerr := fmt.Errorf("idem: consumer %q, message %q, attempt %d of %d: %w", in.consumer, d.Message.ID, attempts, in.o.MaxAttempts, pe)
			if err := d.Retry(ctx, attempts); err != nil {
				return ResultGapRetried, errors.Join(rerr, err)
			}
			return ResultGapRetried, rerr
		}
	}
	tx, err := in.store.Begin(ctx)
	if err != nil {
		return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, storeErr("begin", err))
	}
	parked, err := in.parkTx(ctx, tx, d, pe.Reason, attempts, first, now)
	if err == nil {
		err = in.commit(ctx, tx)
	} else {
		in.rollback(ctx, tx)
	}
	if err != nil {
		return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, storeErr("park", err))
	}
	if !parked { // a copy was processed or parked meanwhile
		in.stats.duplicates.Add(1)
		return ResultDuplicate, in.ack(ctx, d)
	}
	in.stats.parked.Add(1)
	in.o.Logger.Warn("idem: message parked", slog.String("consumer", in.consumer), slog.String("message_id", d.Message.ID),
		slog.String("aggregate_id", d.Message.Headers.Get(HeaderAggregateID)), slog.Int("attempts", attempts), slog.String("reason", pe.Reason))
	return ResultParked, in.ack(ctx, d)
}

func (in *Inbox[Tx]) parkTx(ctx context.Context, tx Tx, d *broker.Delivery, reason string, attempts int, first, now time.Time) (bool, error) {
	c, err := in.store.Claim(ctx, tx, seam.ClaimRequest{Consumer: in.consumer, IDs: []string{d.Message.ID}, At: now})
	if err != nil || !c[0].New {
		return false, err
	}
	if err := in.store.Park(ctx, tx, parkedFrom(in.consumer, d, reason, attempts, first, now)); err != nil {
		return false, err
	}
	return true, in.store.ClearFailure(ctx, tx, in.consumer, d.Message.ID)
}

// parkedFrom is d as the store parks it, with reason as driver.BoundReason
// gives it (escaped, at most driver.MaxReasonLen bytes), as a dead letter
// carries it.
func parkedFrom(consumer string, d *broker.Delivery, reason string, attempts int, first, now time.Time) *Parked {
	m := d.Message
	ev, _ := ParseEvent(m)
	if ev.AggregateID == "" {
		ev.AggregateID = m.Headers.Get(HeaderAggregateID)
	}
	return &Parked{
		Consumer: consumer, MessageID: m.ID, AggregateID: ev.AggregateID, Version: ev.Version, Sequence: ev.Sequence,
		Key: m.Key, Headers: m.Headers, Body: m.Body, Reason: driver.BoundReason(reason), Attempts: attempts, FirstSeen: first, LastSeen: now,
	}
}

// commit commits tx. Once the handler has succeeded, the commit is not
// interrupted when ctx is canceled (it is bounded by CommitTimeout
// instead): a COMMIT cut off in flight leaves its outcome unknown, and the
// delivery would be nacked although its effect may be in place.
func (in *Inbox[Tx]) commit(ctx context.Context, tx Tx) error {
	cctx, span := childSpan(in.commitCtx(ctx), "inbox commit")
	err := in.store.Commit(cctx, tx)
	endChild(span, err)
	return err
}

// commitCtx is ctx without its cancellation, bounded by CommitTimeout (a
// deadline shared by the commits that begin close together, see
// commitDeadlines): for commits and rollbacks.
func (in *Inbox[Tx]) commitCtx(ctx context.Context) context.Context {
	return in.deadlines.bound(ctx)
}

// settleCtx is ctx without its cancellation, for acks, nacks and
// dead-letters: the delivery's subscription bounds a settle without a
// deadline by its SettleTimeout.
func settleCtx(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

// rollback rolls tx back, even when ctx ended, bounded by CommitTimeout as
// commits are: a store that does not answer cannot hold the handler loop.
func (in *Inbox[Tx]) rollback(ctx context.Context, tx Tx) {
	_ = in.store.Rollback(in.commitCtx(ctx), tx)
}

func (in *Inbox[Tx]) ack(ctx context.Context, d *broker.Delivery) error {
	sctx := settleCtx(ctx)
	if err := d.Ack(sctx); err != nil {
		return in.ackFailed(d, err)
	}
	return nil
}

// ackFailed counts and logs the failed ack of d after its commit, and
// returns the error for it, matching ErrAckAfterCommit.
func (in *Inbox[Tx]) ackFailed(d *broker.Delivery, err error) error {
	in.stats.ackFailures.Add(1)
	in.tel.ackFailed(context.Background())
	in.o.Logger.Warn("idem: committed, but the ack failed; the redelivery will be recognised as a duplicate",
		slog.String("consumer", in.consumer), slog.String("message_id", d.Message.ID), slog.String("error", err.Error()))
	return fmt.Errorf("%w: consumer %q, message %q: %w", ErrAckAfterCommit, in.consumer, d.Message.ID, err)
}

// Stats are an inbox's counters since it was created, and one gauge
// (Waiting).
type Stats struct {
	Processed   int64 // handler ran and committed
	Duplicates  int64 // already claimed: acknowledged without running
	Failed      int64 // handler errors (rolled back, nacked or dead-lettered)
	Retried     int64 // *ParkError attempts below MaxAttempts (nacked)
	Parked      int64 // parked, including held
	Held        int64 // parked behind an already parked message
	AckFailures int64 // committed, then the ack failed (ErrAckAfterCommit)
	StoreErrors int64 // begin, claim or commit failed, ctx not done (nacked)
	// Conflicts counts transactions that failed only because of a
	// concurrent one (conflicts: a deadlock's victim) and were tried
	// again at once, their deliveries not nacked.
	Conflicts int64
	Applied   int64 // version checks: applied
	Stale     int64 // handler returned SkipStale (version checks: duplicate or stale)
	Gaps      int64 // version checks: gap or missing aggregate
	Purged    int64 // inbox records deleted (Purge and the scheduled purge)
	Replayed  int64 // parked messages replayed successfully
	// Early counts versioned events held in the store ahead of their
	// aggregate (ResultEarly); EarlyApplied those of them applied after
	// their predecessor (also counted in Applied). Early minus
	// EarlyApplied is what is held now or was parked.
	Early        int64
	EarlyApplied int64
	// Commits counts the transactions Handle committed; with Options.Batch
	// above 1, Processed+Duplicates+Held over Commits is the mean batch.
	Commits int64
	// Waiting is how many Handle calls wait, now, to join the next
	// transaction (Options.Batch above 1).
	Waiting int64
}

type stats struct {
	processed, duplicates, failed, retried, parked, held, ackFailures, storeErrors atomic.Int64
	applied, stale, gaps, purged, replayed, commits, waiting                       atomic.Int64
	early, earlyApplied, conflicts                                                 atomic.Int64
}

// Stats returns the inbox's counters.
func (in *Inbox[Tx]) Stats() Stats {
	s := &in.stats
	return Stats{
		Processed: s.processed.Load(), Duplicates: s.duplicates.Load(), Failed: s.failed.Load(), Retried: s.retried.Load(),
		Parked: s.parked.Load(), Held: s.held.Load(), AckFailures: s.ackFailures.Load(), StoreErrors: s.storeErrors.Load(),
		Applied: s.applied.Load(), Stale: s.stale.Load(), Gaps: s.gaps.Load(), Purged: s.purged.Load(), Replayed: s.replayed.Load(),
		Commits: s.commits.Load(), Waiting: s.waiting.Load(), Early: s.early.Load(), EarlyApplied: s.earlyApplied.Load(),
		Conflicts: s.conflicts.Load(),
	}
}

// Purge deletes the consumer's inbox records older than the retention, in
// transactions of at most Options.PurgeBatch records, until none is left or
// ctx is done. It returns how many it deleted. A store that expires
// records by whole tables (expirer: idem/postgres with
// Options.InboxSlice) drops them a table at a time instead, once the
// table's newest possible record is older than the retention. The inbox also purges by
// itself (see Options.PurgeInterval); call Purge where that is turned off,
// or to purge at once. With an unbounded retention it deletes nothing.
func (in *Inbox[Tx]) Purge(ctx context.Context) (int, error) {
	if in.o.Retention == capability.HorizonUnbounded {
		return 0, nil
	}
	now := in.o.Now()
	total := 0
	for {
		n, err := in.expire(ctx, now)
		total += n
		in.stats.purged.Add(int64(n))
		if err != nil {
			return total, fmt.Errorf("idem: purge: %w", err)
		}
		if n < in.o.PurgeBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// expire runs one purge batch of the records older than the retention at
// now: by whole tables where the store does (expirer), else by rows.
func (in *Inbox[Tx]) expire(ctx context.Context, now time.Time) (int, error) {
	if e, ok := in.store.(expirer); ok {
		return e.Expire(ctx, in.consumer, now, in.o.Retention, in.o.PurgeBatch)
	}
	return in.store.Purge(ctx, in.consumer, now.Add(-in.o.Retention), in.o.PurgeBatch)
}

// purgeDue runs one purge batch if the lazy purge is due (see
// Options.PurgeInterval) and no other call is running one.
func (in *Inbox[Tx]) purgeDue(ctx context.Context) {
	if in.o.PurgeInterval < 0 || in.o.Retention == capability.HorizonUnbounded {
		return
	}
	now := in.o.Now()
	if now.UnixNano() < in.nextPurge.Load() || !in.purging.CompareAndSwap(false, true) {
		return
	}
	defer in.purging.Store(false)
	if now.UnixNano() < in.nextPurge.Load() { // another call just purged
		return
	}
	n, err := in.expire(ctx, now)
	in.stats.purged.Add(int64(n))
	next := now.Add(in.o.PurgeInterval)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			in.o.Logger.Warn("idem: purge failed; retrying after the interval", slog.String("consumer", in.consumer),
				slog.String("error", err.Error()))
		}
	case n >= in.o.PurgeBatch:
		next = now // more to delete: the next call continues
	}
	in.nextPurge.Store(next.UnixNano())
}
