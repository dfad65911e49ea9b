package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/store"
)

// Handler applies one delivery's effect inside tx, the transaction that also
// claims the delivery in the inbox. It must do all its writes through tx,
// must not commit or roll tx back, and must not settle d: the inbox does
// both. Returning an error rolls everything back.
type Handler[Tx any] func(ctx context.Context, tx Tx, d *broker.Delivery) error

// Options configures an Inbox. Nil means defaults.
type Options struct {
	// Retention is how long inbox records are kept; Purge deletes older
	// ones. It must cover the subscription's redelivery horizon
	// (Capabilities.RedeliveryHorizon), or a redelivered copy would find
	// no record and run again:
	//
	//   - finite horizon: default the horizon; a shorter Retention is
	//     refused (ErrRetention) unless AllowShortRetention;
	//   - broker.HorizonUnbounded (the broker may redeliver at any time):
	//     default 0, which keeps records for ever (Purge deletes nothing
	//     and Inbox.Retention reports broker.HorizonUnbounded); any finite
	//     Retention is refused unless AllowShortRetention;
	//   - broker.HorizonUnknown (the driver cannot tell): there is no
	//     default, NewInbox requires an explicit Retention (ErrRetention
	//     otherwise). Choose one longer than any redelivery you expect.
	//
	// broker.HorizonUnbounded as Retention keeps records for ever.
	Retention time.Duration
	// AllowShortRetention accepts a Retention shorter than the redelivery
	// horizon, finite or unbounded. The caller knowingly takes on the risk
	// of effects applied twice.
	AllowShortRetention bool
	// Backoff gives the retry delay after a failed attempt, by attempt
	// number (default: 100ms doubling to 30s). On brokers with
	// Capabilities.NackDelay the delivery is nacked with that delay;
	// otherwise the inbox waits it out itself (at most half the lock
	// timeout, and never past ctx) and nacks without delay.
	Backoff broker.Backoff
	// MaxAttempts is how many attempts a handler returning a *ParkError
	// (a gap) gets before the message is parked (default 5). Each retry
	// is a nack, so a broker delivery: keep MaxAttempts at or below the
	// broker's delivery limit (Capabilities.DeliveryLimit), or the broker
	// dead-letters a waiting event before the inbox parks it (Explain
	// flags it).
	MaxAttempts int
	// NoHold turns off holding: by default, a message whose aggregate
	// (HeaderAggregateID) has a parked message is parked behind it without
	// running the handler, so an aggregate's messages are applied in order
	// once replayed. With NoHold they are processed as they come.
	NoHold bool
	// PurgeBatch is the most records one Purge transaction deletes
	// (default 1000).
	PurgeBatch int
	// PurgeInterval is how often the inbox purges its expired records by
	// itself (default 10 minutes; negative: never, call Purge yourself).
	// The purge is lazy and runs no goroutine: the first Handle or
	// HandleBatch call after the interval has passed deletes one batch
	// (at most PurgeBatch records) before its own work, and while batches
	// come back full the next call deletes the next one. Only one call
	// purges at a time; the others do not wait. A failed purge is logged
	// and tried again after the interval. With an unbounded retention
	// nothing is purged; an inbox that handles nothing purges nothing
	// until its next delivery.
	PurgeInterval time.Duration
	// SettleTimeout bounds each commit, rollback, ack or nack (default
	// 30s). None of them stops when the ctx passed to Handle is canceled:
	// work that succeeded is committed and acknowledged, work that failed
	// is rolled back.
	SettleTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives ack-after-commit failures and parking events
	// (default slog.Default()).
	Logger *slog.Logger
	// TracerProvider receives Handle's spans, and MeterProvider the
	// inbox's result counters (see the package doc, Telemetry). Default:
	// the global providers.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// ErrRetention matches the error NewInbox returns for a retention that does
// not cover the redelivery horizon: shorter than a finite horizon, finite
// under an unbounded one, or missing where the horizon is unknown.
var ErrRetention = errors.New("idem: retention does not cover the redelivery horizon")

// ErrAckAfterCommit matches the error Handle returns when the transaction
// committed but the acknowledgement failed. The effect is in place; the
// broker will deliver the message again, and the inbox will recognise that
// copy as a duplicate and acknowledge it without running the handler.
var ErrAckAfterCommit = errors.New("idem: committed, but the ack failed")

// ErrNoID matches the error for a delivery whose message has no ID, which
// the inbox cannot deduplicate; it also matches ErrInvalidID. Such
// deliveries are dead-lettered (or parked, see ErrInvalidID).
var ErrNoID = fmt.Errorf("%w: message has no ID", ErrInvalidID)

// ErrInvalidID matches the error for a delivery whose message ID breaks the
// rules of broker.ValidateID (empty, over broker.MaxIDLen bytes, not UTF-8,
// or with control characters). Publish refuses such IDs, but a foreign
// producer can still send them, and a store may be unable to keep them (a
// NUL byte in PostgreSQL). The inbox checks every ID before claiming it and
// settles such a message for good instead of retrying it for ever: it
// dead-letters it with the reason where the broker can (ResultDeadLettered),
// and otherwise parks it (ResultParked) under a stand-in ID derived from
// the original ("wary-invalid-id:" and the SHA-256 of its bytes, so that
// copies are duplicates; a fresh random one for a message without an ID).
// The error matches broker.ErrInvalid too.
var ErrInvalidID = errors.New("idem: invalid message ID")

// Inbox processes deliveries for one named consumer so that each message's
// effect is committed once: see the package documentation for what that
// rests on. An Inbox is safe for concurrent use.
type Inbox[Tx any] struct {
	store    store.Store[Tx]
	consumer string
	caps     broker.Capabilities
	o        Options
	stats    stats
	// nextPurge is when the lazy purge is due (Unix nanoseconds); purging
	// is held by the call that runs it.
	nextPurge atomic.Int64
	purging   atomic.Bool
	tel       *inboxTel
}

// NewInbox returns an inbox for consumer on store. caps are the
// capabilities of the subscription the deliveries come from
// (sub.Capabilities()): the redelivery horizon bounds the retention, and
// NackDelay and DeadLetter decide how failures are settled.
func NewInbox[Tx any](st store.Store[Tx], consumer string, caps broker.Capabilities, opts *Options) (*Inbox[Tx], error) {
	if st == nil {
		return nil, errors.New("idem: nil store")
	}
	if err := ValidateConsumer(consumer); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := retention(&o, consumer, caps.RedeliveryHorizon); err != nil {
		return nil, err
	}
	c := optionCheck{what: fmt.Sprintf("consumer %q: inbox options", consumer)}
	c.backoff("Backoff", o.Backoff)
	c.count("MaxAttempts", o.MaxAttempts)
	c.count("PurgeBatch", o.PurgeBatch)
	c.duration("PurgeInterval", o.PurgeInterval, true)
	c.duration("SettleTimeout", o.SettleTimeout, false)
	if err := c.err(); err != nil {
		return nil, err
	}
	if o.MaxAttempts < 1 {
		o.MaxAttempts = 5
	}
	if o.PurgeBatch < 1 {
		o.PurgeBatch = 1000
	}
	if o.PurgeInterval == 0 {
		o.PurgeInterval = 10 * time.Minute
	}
	if o.SettleTimeout <= 0 {
		o.SettleTimeout = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	logStatement(o.Logger, "idem: inbox started", explainPart(Pipeline{Caps: caps, Inbox: true, Consumer: consumer, InboxOptions: &o}, "transport", "consumption"), slog.String("consumer", consumer))
	in := &Inbox[Tx]{store: st, consumer: consumer, caps: caps, o: o}
	newInboxTel(in)
	return in, nil
}

// retention sets o.Retention from the horizon h, or refuses it (see
// Options.Retention).
func retention(o *Options, consumer string, h time.Duration) error {
	switch {
	case o.Retention < 0:
		return fmt.Errorf("%w: consumer %q: negative retention %s", broker.ErrInvalid, consumer, o.Retention)
	case h == broker.HorizonUnknown && o.Retention == 0:
		return fmt.Errorf("%w: consumer %q: the subscription's redelivery horizon is unknown, so no retention is safe by default; set Options.Retention to longer than any redelivery you expect", ErrRetention, consumer)
	case o.Retention == 0:
		o.Retention = h // unbounded: keep for ever
	case h != broker.HorizonUnknown && o.Retention < h && !o.AllowShortRetention:
		return fmt.Errorf("%w: consumer %q: retention %s < horizon %s (a copy delivered after the inbox record is purged would run again); raise Options.Retention (0 keeps the horizon) or set Options.AllowShortRetention", ErrRetention, consumer, broker.HorizonString(o.Retention), broker.HorizonString(h))
	}
	return nil
}

// Consumer returns the consumer name.
func (in *Inbox[Tx]) Consumer() string { return in.consumer }

// Store returns the store.
func (in *Inbox[Tx]) Store() store.Store[Tx] { return in.store }

// Retention returns the effective retention; broker.HorizonUnbounded means
// records are kept for ever.
func (in *Inbox[Tx]) Retention() time.Duration { return in.o.Retention }

// Wrap adapts the inbox to broker.Subscription.Run: each delivery goes
// through Handle with h. Handle settles every delivery itself; the error it
// returns goes to Run (which retries an acknowledgement that failed after
// the commit, see ErrAckAfterCommit).
func (in *Inbox[Tx]) Wrap(h Handler[Tx]) broker.Handler {
	return func(ctx context.Context, d *broker.Delivery) error {
		_, err := in.Handle(ctx, d, h)
		return err
	}
}

// WrapBatch adapts the inbox to broker.Subscription.RunBatch: each batch
// goes through HandleBatch with h, in one transaction. HandleBatch settles
// every delivery itself.
func (in *Inbox[Tx]) WrapBatch(h Handler[Tx]) broker.BatchHandler {
	return func(ctx context.Context, ds []*broker.Delivery) error {
		_, err := in.HandleBatch(ctx, ds, h)
		return err
	}
}

// Handle processes d: in one transaction it claims (consumer, message ID)
// and runs h, then commits, then acknowledges d. It returns what it did
// (see Result):
//
//   - ResultApplied: h ran and committed; ResultStale: h returned
//     SkipStale, and the claim committed.
//   - ResultDuplicate: already claimed; acknowledged without running h.
//   - ResultHeld: the message's aggregate has a parked message, so it was
//     parked behind it (unless Options.NoHold) and acknowledged.
//   - ResultFailed: h failed (or panicked), or the store did: rolled back
//     and nacked with a delay from Options.Backoff, never acknowledged;
//     the error is returned. ResultDeadLettered: h's error was marked with
//     broker.Permanent and the broker can dead-letter.
//   - A message that cannot be claimed, because its ID breaks the ID rules
//     (ErrInvalidID) or the store refused one of its values
//     (store.ErrData), is not retried: ResultDeadLettered, or ResultParked
//     where the broker cannot dead-letter (see ErrInvalidID).
//   - ResultGapRetried, ResultParked: h returned a *ParkError: retried
//     with backoff, then parked (see ParkError).
//
// If the commit succeeded and the acknowledgement failed, Handle returns
// the result with an error matching ErrAckAfterCommit and counts it in
// Stats.AckFailures; the redelivery will be a duplicate.
func (in *Inbox[Tx]) Handle(ctx context.Context, d *broker.Delivery, h Handler[Tx]) (Result, error) {
	ctx, span := in.tel.startHandle(ctx, d)
	r, err := in.handle(ctx, d, h)
	in.tel.endHandle(ctx, span, r, err)
	return r, err
}

func (in *Inbox[Tx]) handle(ctx context.Context, d *broker.Delivery, h Handler[Tx]) (Result, error) {
	in.purgeDue(ctx)
	if err := checkID(d.Message.ID); err != nil {
		return in.poison(ctx, d, err)
	}
	var (
		tx  Tx
		out Result
		err error
	)
	if bc, ok := in.store.(store.ClaimBeginner[Tx]); ok && !in.needsChecks(d) {
		// The claim travels with BEGIN: one round trip fewer.
		var claimed bool
		cctx, span := childSpan(ctx, "inbox claim")
		tx, claimed, err = bc.BeginClaim(cctx, in.consumer, d.Message.ID, in.o.Now())
		endChild(span, err)
		if err != nil {
			if broker.IsPermanent(err) { // the store refused a value of this message
				return in.poison(ctx, d, storeErr("begin and claim", err))
			}
			return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, storeErr("begin and claim", err))
		}
		if !claimed { // nothing was begun
			in.count(ResultDuplicate)
			return ResultDuplicate, in.ack(ctx, d)
		}
		out, err = call(ctx, tx, d, h)
	} else {
		tx, err = in.store.Begin(ctx)
		if err != nil {
			return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, fmt.Errorf("idem: begin: %w", err))
		}
		out, err = in.apply(ctx, tx, d, h)
	}
	if err != nil {
		in.rollback(ctx, tx)
		if errors.Is(err, errStore) {
			if broker.IsPermanent(err) { // the store refused a value of this message
				return in.poison(ctx, d, err)
			}
			return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, err)
		}
		return in.fail(ctx, d, err)
	}
	if err := in.commit(ctx, tx); err != nil {
		return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, fmt.Errorf("idem: commit: %w", err))
	}
	in.count(out)
	return out, in.ack(ctx, d)
}

// needsChecks reports whether d needs more than the claim before its
// handler runs: the held check (it has an aggregate and holding is on) or
// clearing failures recorded by earlier attempts.
func (in *Inbox[Tx]) needsChecks(d *broker.Delivery) bool {
	return d.Attempt > 1 || in.holds(d)
}

// count counts a committed result.
func (in *Inbox[Tx]) count(r Result) {
	switch r {
	case ResultApplied:
		in.stats.processed.Add(1)
	case ResultStale:
		in.stats.processed.Add(1)
		in.stats.stale.Add(1)
	case ResultDuplicate:
		in.stats.duplicates.Add(1)
	case ResultHeld:
		in.stats.held.Add(1)
		in.stats.parked.Add(1)
	}
}

// errStore marks failures of the store (not of the handler): the whole
// transaction is abandoned and the deliveries nacked.
var errStore = errors.New("idem: store")

func storeErr(op string, err error) error { return fmt.Errorf("%w: %s: %w", errStore, op, err) }

// apply claims d and runs h in tx.
func (in *Inbox[Tx]) apply(ctx context.Context, tx Tx, d *broker.Delivery, h Handler[Tx]) (Result, error) {
	if cc, ok := in.store.(store.ClaimChecker[Tx]); ok && in.holds(d) {
		cctx, span := childSpan(ctx, "inbox claim")
		claimed, held, err := cc.ClaimCheck(cctx, tx, in.consumer, d.Message.ID, d.Message.Headers[HeaderAggregateID], in.o.Now())
		endChild(span, err)
		if err != nil {
			return 0, storeErr("claim", err)
		}
		if !claimed {
			return ResultDuplicate, nil
		}
		return in.runChecked(ctx, tx, d, h, held)
	}
	cctx, span := childSpan(ctx, "inbox claim")
	claimed, err := in.store.Claim(cctx, tx, in.consumer, d.Message.ID, in.o.Now())
	endChild(span, err)
	if err != nil {
		return 0, storeErr("claim", err)
	}
	return in.run(ctx, tx, d, h, claimed)
}

// holds reports whether d is subject to holding: it has an aggregate and
// holding is on.
func (in *Inbox[Tx]) holds(d *broker.Delivery) bool {
	return !in.o.NoHold && d.Message.Headers[HeaderAggregateID] != ""
}

// run is apply after the claim.
func (in *Inbox[Tx]) run(ctx context.Context, tx Tx, d *broker.Delivery, h Handler[Tx], claimed bool) (Result, error) {
	r, ok, err := in.prepare(ctx, tx, d, claimed)
	if err != nil || !ok {
		return r, err
	}
	return call(ctx, tx, d, h)
}

// runChecked is run after the held check.
func (in *Inbox[Tx]) runChecked(ctx context.Context, tx Tx, d *broker.Delivery, h Handler[Tx], held bool) (Result, error) {
	r, ok, err := in.prepareChecked(ctx, tx, d, held)
	if err != nil || !ok {
		return r, err
	}
	return call(ctx, tx, d, h)
}

// call runs h, turning a panic into an error and SkipStale into
// ResultStale.
func call[Tx any](ctx context.Context, tx Tx, d *broker.Delivery, h Handler[Tx]) (r Result, err error) {
	ctx, span := childSpan(ctx, "handler")
	defer func() {
		if p := recover(); p != nil {
			r, err = 0, fmt.Errorf("idem: handler panic: %v\n%s", p, debug.Stack())
		}
		endChild(span, err)
	}()
	switch err := h(ctx, tx, d); {
	case err == nil:
		return ResultApplied, nil
	case errors.Is(err, SkipStale):
		return ResultStale, nil
	default:
		return 0, err
	}
}

// fail settles d after its handler failed with herr (the transaction is
// already rolled back).
func (in *Inbox[Tx]) fail(ctx context.Context, d *broker.Delivery, herr error) (Result, error) {
	var pe *ParkError
	if errors.As(herr, &pe) {
		return in.parkOrRetry(ctx, d, pe)
	}
	in.stats.failed.Add(1)
	herr = fmt.Errorf("idem: consumer %q, message %q, attempt %d: %w", in.consumer, d.Message.ID, d.Attempt, herr)
	if broker.IsPermanent(herr) && in.caps.DeadLetter {
		sctx, cancel := in.settleCtx(ctx)
		defer cancel()
		if err := d.DeadLetter(sctx, herr.Error()); err != nil {
			return ResultDeadLettered, errors.Join(herr, err)
		}
		return ResultDeadLettered, herr
	}
	if err := in.nack(ctx, d, d.Attempt); err != nil {
		return ResultFailed, errors.Join(herr, err)
	}
	return ResultFailed, herr
}

// abort nacks deliveries after a store failure.
func (in *Inbox[Tx]) abort(ctx context.Context, ds []*broker.Delivery, err error) error {
	if ctx.Err() == nil {
		in.stats.storeErrors.Add(1)
	}
	errs := []error{err}
	for _, d := range ds {
		if nerr := in.nack(ctx, d, d.Attempt); nerr != nil {
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
		attempts, first, err = in.store.RecordFailure(ctx, in.consumer, d.Message.ID, pe.Reason, now)
		if err != nil {
			return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, storeErr("record failure", err))
		}
		attempts = max(attempts, d.Attempt)
		if attempts < in.o.MaxAttempts {
			in.stats.retried.Add(1)
			rerr := fmt.Errorf("idem: consumer %q, message %q, attempt %d of %d: %w", in.consumer, d.Message.ID, attempts, in.o.MaxAttempts, pe)
			if err := in.nack(ctx, d, attempts); err != nil {
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
		slog.String("aggregate_id", d.Message.Headers[HeaderAggregateID]), slog.Int("attempts", attempts), slog.String("reason", pe.Reason))
	return ResultParked, in.ack(ctx, d)
}

func (in *Inbox[Tx]) parkTx(ctx context.Context, tx Tx, d *broker.Delivery, reason string, attempts int, first, now time.Time) (bool, error) {
	claimed, err := in.store.Claim(ctx, tx, in.consumer, d.Message.ID, now)
	if err != nil || !claimed {
		return false, err
	}
	if err := in.store.Park(ctx, tx, parkedFrom(in.consumer, d, reason, attempts, first, now)); err != nil {
		return false, err
	}
	return true, in.store.ClearFailure(ctx, tx, in.consumer, d.Message.ID)
}

func parkedFrom(consumer string, d *broker.Delivery, reason string, attempts int, first, now time.Time) *Parked {
	m := d.Message
	ev, _ := ParseEvent(m)
	if ev.AggregateID == "" {
		ev.AggregateID = m.Headers[HeaderAggregateID]
	}
	return &Parked{
		Consumer: consumer, MessageID: m.ID, AggregateID: ev.AggregateID, Version: ev.Version, Sequence: ev.Sequence,
		Key: m.Key, Headers: m.Headers, Body: m.Body, Reason: reason, Attempts: attempts, FirstSeen: first, LastSeen: now,
	}
}

// commit commits tx. Once the handler has succeeded, the commit is not
// interrupted when ctx is canceled (it is bounded by SettleTimeout
// instead): a COMMIT cut off in flight leaves its outcome unknown, and the
// delivery would be nacked although its effect may be in place.
func (in *Inbox[Tx]) commit(ctx context.Context, tx Tx) error {
	cctx, cancel := in.settleCtx(ctx)
	defer cancel()
	cctx, span := childSpan(cctx, "inbox commit")
	err := in.store.Commit(cctx, tx)
	endChild(span, err)
	return err
}

func (in *Inbox[Tx]) settleCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), in.o.SettleTimeout)
}

// rollback rolls tx back, even when ctx ended, bounded by SettleTimeout as
// commits and acks are: a store that does not answer cannot hold the
// handler loop.
func (in *Inbox[Tx]) rollback(ctx context.Context, tx Tx) {
	rctx, cancel := in.settleCtx(ctx)
	defer cancel()
	_ = in.store.Rollback(rctx, tx)
}

func (in *Inbox[Tx]) ack(ctx context.Context, d *broker.Delivery) error {
	sctx, cancel := in.settleCtx(ctx)
	defer cancel()
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

// nack returns d for redelivery after the backoff for attempt.
func (in *Inbox[Tx]) nack(ctx context.Context, d *broker.Delivery, attempt int) error {
	delay := in.o.Backoff.Delay(max(attempt, 1))
	if !in.caps.NackDelay {
		if lt := in.caps.LockTimeout; lt > 0 && delay > lt/2 {
			delay = lt / 2
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		delay = 0
	}
	sctx, cancel := in.settleCtx(ctx)
	defer cancel()
	return d.Nack(sctx, delay)
}

// Stats are an inbox's counters since it was created.
type Stats struct {
	Processed   int64 // handler ran and committed
	Duplicates  int64 // already claimed: acknowledged without running
	Failed      int64 // handler errors (rolled back, nacked or dead-lettered)
	Retried     int64 // *ParkError attempts below MaxAttempts (nacked)
	Parked      int64 // parked, including held
	Held        int64 // parked behind an already parked message
	AckFailures int64 // committed, then the ack failed (ErrAckAfterCommit)
	StoreErrors int64 // begin, claim or commit failed, ctx not done (nacked)
	Applied     int64 // version checks: applied
	Stale       int64 // handler returned SkipStale (version checks: duplicate or stale)
	Gaps        int64 // version checks: gap or missing aggregate
	Purged      int64 // inbox records deleted (Purge and the scheduled purge)
	Replayed    int64 // parked messages replayed successfully
}

type stats struct {
	processed, duplicates, failed, retried, parked, held, ackFailures, storeErrors atomic.Int64
	applied, stale, gaps, purged, replayed                                         atomic.Int64
}

// Stats returns the inbox's counters.
func (in *Inbox[Tx]) Stats() Stats {
	s := &in.stats
	return Stats{
		Processed: s.processed.Load(), Duplicates: s.duplicates.Load(), Failed: s.failed.Load(), Retried: s.retried.Load(),
		Parked: s.parked.Load(), Held: s.held.Load(), AckFailures: s.ackFailures.Load(), StoreErrors: s.storeErrors.Load(),
		Applied: s.applied.Load(), Stale: s.stale.Load(), Gaps: s.gaps.Load(), Purged: s.purged.Load(), Replayed: s.replayed.Load(),
	}
}

// Purge deletes the consumer's inbox records older than the retention, in
// transactions of at most Options.PurgeBatch records, until none is left or
// ctx is done. It returns how many it deleted. The inbox also purges by
// itself (see Options.PurgeInterval); call Purge where that is turned off,
// or to purge at once. With an unbounded retention it deletes nothing.
func (in *Inbox[Tx]) Purge(ctx context.Context) (int, error) {
	if in.o.Retention == broker.HorizonUnbounded {
		return 0, nil
	}
	before := in.o.Now().Add(-in.o.Retention)
	total := 0
	for {
		n, err := in.store.Purge(ctx, in.consumer, before, in.o.PurgeBatch)
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

// purgeDue runs one purge batch if the lazy purge is due (see
// Options.PurgeInterval) and no other call is running one.
func (in *Inbox[Tx]) purgeDue(ctx context.Context) {
	if in.o.PurgeInterval < 0 || in.o.Retention == broker.HorizonUnbounded {
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
	n, err := in.store.Purge(ctx, in.consumer, now.Add(-in.o.Retention), in.o.PurgeBatch)
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
