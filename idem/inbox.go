package idem

import (
	"context"
	"errors"
	"fmt"
	"github.com/wary-go/wary/internal/wotel"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem/guarantee"
	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/internal/defaults"
	"github.com/wary-go/wary/idem/internal/seam"
)

// Handler applies one delivery's effect inside tx, the transaction that also
// claims the delivery in the inbox. It must do all its writes through tx,
// must not commit or roll tx back, and must not settle d: the inbox does
// both. Returning an error rolls everything back.
type Handler[Tx any] func(ctx context.Context, tx Tx, d *broker.Delivery) error

// Options configures an Inbox. Nil means defaults.
type Options struct {
	// Retention is how long inbox records are kept at least; Purge
	// deletes older ones (or drops the tables that hold only older ones:
	// expirer). It must cover the subscription's redelivery horizon
	// (capability.Subscription.RedeliveryHorizon), or a redelivered copy would find
	// no record and run again:
	//
	//   - finite horizon: default the horizon; a shorter Retention is
	//     refused (ErrRetention) unless AllowShortRetention;
	//   - capability.HorizonUnbounded (the broker may redeliver at any time):
	//     default 0, which keeps records for ever (Purge deletes nothing
	//     and Inbox.Retention reports capability.HorizonUnbounded); any finite
	//     Retention is refused unless AllowShortRetention;
	//   - capability.HorizonUnknown (the driver cannot tell): there is no
	//     default, NewInbox requires an explicit Retention (ErrRetention
	//     otherwise). Choose one longer than any redelivery you expect.
	//
	// capability.HorizonUnbounded as Retention keeps records for ever.
	Retention time.Duration
	// AllowShortRetention accepts a Retention shorter than the redelivery
	// horizon, finite or unbounded. The caller knowingly takes on the risk
	// of effects applied twice.
	AllowShortRetention bool
	// MaxAttempts is how many attempts a handler returning a *ParkError
	// (a gap, where gaps are retried) gets before the message is parked
	// (default 5). Each retry
	// is a nack, so a broker delivery: keep MaxAttempts at or below the
	// broker's delivery limit (capability.Subscription.DeliveryLimit), or the broker
	// dead-letters a waiting event before the inbox parks it (the
	// statement, Inbox.Statement, flags it).
	MaxAttempts int
	// Versions turns on version checks: each delivery must carry a
	// versioned event (HeaderAggregateID and HeaderAggregateVersion),
	// checked against the consumer's state table (Store.CheckVersion) in
	// the inbox transaction before the handler runs:
	//
	//   - the next version (or version 1 of an aggregate without a row):
	//     the handler runs and Handle reports ResultApplied. For version 1
	//     it must insert the row with version 1; for later ones the
	//     version column is already updated, and it writes the rest of
	//     the state. It reads the event with ParseEvent(d.Message).
	//   - a duplicate or an older event: the handler does not run; the
	//     claim commits and Handle reports ResultStale.
	//   - a gap (a newer version than the next, or a version above 1 of an
	//     aggregate without a row): held in the store as an early event
	//     (ResultEarly) and applied when its predecessor is, or retried
	//     through the broker: see Gaps. An aggregate whose gap does not
	//     close is parked (ResultParked: after EarlyLimit, or after
	//     MaxAttempts attempts); later events of the aggregate are held
	//     behind it (ResultHeld, unless NoHold) until an operator replays
	//     them (Replay, ReplayAll), through the same checks.
	//   - a message without valid event headers: dead-lettered as
	//     permanent (parked where the broker cannot dead-letter).
	//
	// The zero VersionTable: no version checks. NewInbox refuses invalid
	// names (ErrInvalidName).
	Versions VersionTable
	// Gaps says what version checks do with a gap (default GapsAuto:
	// held in the store where the subscription keeps no order per
	// aggregate, retried through the broker elsewhere). Holding costs
	// one row per early event (docs/gaps.md) and no broker delivery, so
	// a gap never meets the broker's delivery limit.
	Gaps GapMode
	// EarlyLimit is how long an early event waits for its predecessor
	// (default DefaultEarlyLimit, an hour): when it has waited longer,
	// its aggregate's early events are parked, for an operator to replay
	// (see ExpireEarly).
	EarlyLimit time.Duration
	// Batch is the most deliveries one transaction holds (default 1).
	// Above 1, concurrent calls of Handle (a Run with Concurrency above 1
	// over Wrap) share transactions: while one is in flight the calls
	// that arrive wait, and the next transaction takes up to Batch of
	// them, claimed with one statement and committed with one commit. A
	// call that finds none in flight starts one at once, after yielding
	// to the Go scheduler while that lets more calls join (a lone call
	// waits for nothing else). One transaction is in flight at a time,
	// so Batch is for handlers that only write through tx; set
	// RunOptions.Concurrency to Batch or more. At Batch, most calls of
	// one transaction come back in time to join the next (BENCHMARKS.md,
	// issue 46: on PostgreSQL, 100 callers on Batch 100 commit 60 to 96
	// deliveries at a time, where they took turns in halves before).
	// Each delivery keeps Handle's guarantees and result: a failing one
	// is rolled back and settled alone, and the others are tried again
	// without it. With Versions, a transaction
	// takes the locks of all its aggregates, in the store's one order,
	// before its first handler runs, so that the transactions of
	// concurrent inboxes do not deadlock on shared aggregates
	// (docs/gaps.md).
	Batch int
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
	// The purge is lazy and runs no goroutine: the first Handle call
	// after the interval has passed deletes one batch
	// (at most PurgeBatch records) before its own work, and while batches
	// come back full the next call deletes the next one. Only one call
	// purges at a time; the others do not wait. A failed purge is logged
	// and tried again after the interval. With an unbounded retention
	// nothing is purged; an inbox that handles nothing purges nothing
	// until its next delivery.
	PurgeInterval time.Duration
	// CommitTimeout bounds each commit and rollback of the inbox's
	// transactions (default 30s; commits that begin close together share
	// a deadline, so each is given at least 15/16 of it); its acks, nacks and dead-letters are
	// bounded by its subscription's SubscriptionOptions.SettleTimeout. None of them
	// stops when the ctx passed to Handle is canceled: work that succeeded
	// is committed and acknowledged, work that failed is rolled back.
	CommitTimeout time.Duration
	// Telemetry's Logger receives ack-after-commit failures and parking
	// events, its TracerProvider Handle's spans and its MeterProvider the
	// inbox's result counters (see the package doc, Telemetry); Now is
	// the inbox's clock.
	broker.Telemetry
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
// rules of driver.ValidateID (empty or only white space, over
// driver.MaxIDLen bytes, not UTF-8, or with control characters). Publish refuses such IDs, but a foreign
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
	store    inboxStore[Tx]
	consumer string
	caps     capability.Subscription
	o        Options
	stats    stats
	// nextPurge is when the lazy purge is due (Unix nanoseconds); purging
	// is held by the call that runs it.
	nextPurge atomic.Int64
	purging   atomic.Bool
	// early is the store's part that holds gaps, nil where the inbox
	// retries them (Options.Gaps); nextExpire and expiring are to
	// expireDue what nextPurge and purging are to the purge.
	early      earlyStore[Tx]
	nextExpire atomic.Int64
	expiring   atomic.Bool
	// locks is the store's part that takes aggregate locks, for the
	// shared transactions of an inbox with version checks (see
	// lockAggregates); nil where there are none or the store cannot.
	locks earlyStore[Tx]
	// conflicts recognises the failures that the inbox tries again at
	// once (retryConflict); nil where the store has none.
	conflicts conflicts
	tel       *inboxTel
	deadlines commitDeadlines // CommitTimeout's
	group     group[Tx]
	logged    sync.Once
}

// NewInbox returns an inbox for consumer on the store s. caps are the
// capabilities of the subscription the deliveries come from
// (sub.Capabilities()): the redelivery horizon bounds the retention, and
// NackDelay and DeadLetter decide how failures are settled.
func NewInbox[Tx any](s Store[Tx], consumer string, caps capability.Subscription, opts *Options) (*Inbox[Tx], error) {
	st, err := check.Part[inboxStore[Tx]](s, "the inbox's part")
	if err != nil {
		return nil, err
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
	c := check.Options{What: fmt.Sprintf("consumer %q: inbox options", consumer)}
	if o.hasVersions() {
		if err := o.Versions.Validate(); err != nil {
			return nil, fmt.Errorf("consumer %q: Options.Versions: %w", consumer, err)
		}
	}
	c.Count("MaxAttempts", o.MaxAttempts)
	c.Count("Batch", o.Batch)
	c.Count("PurgeBatch", o.PurgeBatch)
	c.Duration("PurgeInterval", o.PurgeInterval, true)
	c.Duration("CommitTimeout", o.CommitTimeout, false)
	c.Duration("EarlyLimit", o.EarlyLimit, false)
	if err := c.Err(); err != nil {
		return nil, err
	}
	defaults.InboxMaxAttempts(&o.MaxAttempts) // the guarantee assumes the same
	if o.PurgeBatch < 1 {
		o.PurgeBatch = 1000
	}
	if o.PurgeInterval == 0 {
		o.PurgeInterval = 10 * time.Minute
	}
	if o.EarlyLimit <= 0 {
		o.EarlyLimit = DefaultEarlyLimit
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = 30 * time.Second
	}
	t := &o.Telemetry
	wotel.Defaults(&t.Logger, &t.TracerProvider, &t.MeterProvider, &t.Now)
	early, err := gapsHeld(st, &o, caps)
	if err != nil {
		return nil, fmt.Errorf("consumer %q: %w", consumer, err)
	}
	in := &Inbox[Tx]{store: st, consumer: consumer, caps: caps, o: o, early: early, deadlines: commitDeadlines{timeout: o.CommitTimeout}}
	if es, ok := st.(earlyStore[Tx]); ok && o.hasVersions() && o.Batch > 1 {
		in.locks = es
	}
	in.conflicts, _ = st.(conflicts)
	newInboxTel(in)
	return in, nil
}

// hasVersions reports whether o turns version checks on.
func (o *Options) hasVersions() bool { return o.Versions != VersionTable{} }

// Statement is this inbox's part of the guarantee, as built: the transport
// its subscription's capabilities give, and the consumption its options
// give.
func (in *Inbox[Tx]) Statement() guarantee.Statement {
	p := guarantee.Pipeline{Subscription: &in.caps, Inbox: &guarantee.Inbox{Consumer: in.consumer, Retention: in.o.Retention,
		MaxAttempts: in.o.MaxAttempts, Versioned: in.o.hasVersions(), HoldsGaps: in.early != nil, EarlyLimit: in.o.EarlyLimit}}
	return guarantee.Explain(p).Stages("transport", "consumption")
}

// logStart logs the inbox's statement once, when it first handles a
// delivery, as one sentence (at Warn when it has findings, naming each;
// Inbox.Statement and wary explain give the whole statement and the
// fixes).
func (in *Inbox[Tx]) logStart() {
	in.logged.Do(func() {
		st := in.Statement()
		var b strings.Builder
		fmt.Fprintf(&b, "idem: inbox %q started: each message ID applied once", in.consumer)
		if in.o.hasVersions() {
			fmt.Fprintf(&b, ", versions checked in %s", in.o.Versions.Table)
		}
		if in.o.Retention == capability.HorizonUnbounded {
			b.WriteString(", records kept for ever")
		} else {
			d := in.o.Retention.String() // 1h0m0s: 1h
			if strings.HasSuffix(d, "m0s") {
				d = strings.TrimSuffix(d, "0s")
			}
			if strings.HasSuffix(d, "h0m") {
				d = strings.TrimSuffix(d, "0m")
			}
			fmt.Fprintf(&b, ", records kept %s", d)
		}
		if n := len(st.Findings); n > 0 {
			fmt.Fprintf(&b, "; %d misconfigured: ", n)
			for i, f := range st.Findings {
				if i > 0 {
					b.WriteString("; ")
				}
				head, _, _ := strings.Cut(f.Problem, ": ")
				b.WriteString(head)
			}
			b.WriteString(" (Inbox.Statement or wary explain gives the fix)")
		}
		if n := len(st.Unread); n > 0 {
			fmt.Fprintf(&b, "; %d broker setting(s) could not be read: ", n)
			for i, u := range in.caps.Source.Unread {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(string(u.Setting))
			}
		}
		in.o.Logger.Log(context.Background(), st.Level(), b.String(), slog.String("consumer", in.consumer))
	})
}

// retention sets o.Retention from the horizon h, or refuses it (see
// Options.Retention).
func retention(o *Options, consumer string, h time.Duration) error {
	switch {
	case o.Retention < 0:
		return fmt.Errorf("%w: consumer %q: negative retention %s", broker.ErrInvalid, consumer, o.Retention)
	case h == capability.HorizonUnknown && o.Retention == 0:
		return fmt.Errorf("%w: consumer %q: the subscription's redelivery horizon is unknown, so no retention is safe by default; set Options.Retention to longer than any redelivery you expect", ErrRetention, consumer)
	case o.Retention == 0:
		o.Retention = h // unbounded: keep for ever
	case h != capability.HorizonUnknown && o.Retention < h && !o.AllowShortRetention:
		return fmt.Errorf("%w: consumer %q: retention %s < horizon %s (a copy delivered after the inbox record is purged would run again); raise Options.Retention (0 keeps the horizon) or set Options.AllowShortRetention", ErrRetention, consumer, capability.HorizonString(o.Retention), capability.HorizonString(h))
	}
	return nil
}

// Consumer returns the consumer name.
func (in *Inbox[Tx]) Consumer() string { return in.consumer }

// Retention returns the effective retention; capability.HorizonUnbounded means
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
//     and retried (broker.Delivery.Retry, after the Run's RunOptions.Backoff), never acknowledged;
//     the error is returned. ResultDeadLettered: h's error was marked with
//     broker.Permanent and the broker can dead-letter.
//   - A message that cannot be claimed, because its ID breaks the ID rules
//     (ErrInvalidID) or the store refused one of its values
//     (ErrData), is not retried: ResultDeadLettered, or ResultParked
//     where the broker cannot dead-letter (see ErrInvalidID).
//   - ResultGapRetried, ResultParked: h returned a *ParkError: retried
//     with backoff, then parked (see ParkError).
//
// If the commit succeeded and the acknowledgement failed, Handle returns
// the result with an error matching ErrAckAfterCommit and counts it in
// Stats.AckFailures; the redelivery will be a duplicate.
//
// With Options.Versions, h runs behind the version checks; with
// Options.Batch above 1, d may share its transaction with deliveries of
// concurrent calls.
func (in *Inbox[Tx]) Handle(ctx context.Context, d *broker.Delivery, h Handler[Tx]) (Result, error) {
	in.logStart()
	ctx, span := in.tel.startHandle(ctx, d)
	var r Result
	var err error
	if in.o.Batch > 1 {
		it := &item[Tx]{ctx: ctx, d: d, h: h}
		in.handleGrouped(it)
		r, err = it.res, it.err
	} else {
		r, err = in.handle(ctx, d, h)
	}
	in.tel.endHandle(ctx, span, r, err)
	return r, err
}

func (in *Inbox[Tx]) handle(ctx context.Context, d *broker.Delivery, h Handler[Tx]) (Result, error) {
	in.purgeDue(ctx)
	in.expireDue(ctx)
	if err := checkID(d.Message.ID); err != nil {
		return in.poison(ctx, d, err)
	}
	for tried := 0; ; tried++ {
		tx, began, claims, err := in.beginClaim(ctx, []*broker.Delivery{d})
		if err != nil {
			if broker.IsPermanent(err) { // the store refused a value of this message
				return in.poison(ctx, d, storeErr("begin and claim", err))
			}
			if in.retryConflict(ctx, err, tried) {
				continue
			}
			return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, storeErr("begin and claim", err))
		}
		if !began { // a duplicate, and nothing was begun
			in.count(ResultDuplicate)
			return ResultDuplicate, in.ack(ctx, d)
		}
		t := &txRun[Tx]{}
		out, err := in.run(ctx, tx, d, h, claims[0], t)
		if err != nil {
			in.rollback(ctx, tx)
			switch {
			case errors.Is(err, errStore) && broker.IsPermanent(err): // the store refused a value of this message
				return in.poison(ctx, d, err)
			case in.retryConflict(ctx, err, tried):
				continue
			case errors.Is(err, errStore):
				return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, err)
			}
			return in.fail(ctx, d, err)
		}
		if err := in.commit(ctx, tx); err != nil {
			if in.retryConflict(ctx, err, tried) {
				continue
			}
			return ResultFailed, in.abort(ctx, []*broker.Delivery{d}, fmt.Errorf("idem: commit: %w", err))
		}
		in.stats.commits.Add(1)
		in.count(out)
		err = in.ack(ctx, d)
		in.retryStalled(ctx, t)
		return out, err
	}
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
	// ResultEarly and the ResultParked of an expired hold are counted
	// where they happen (hold, parkEarly).
}

// errStore marks failures of the store (not of the handler): the whole
// transaction is abandoned and the deliveries nacked.
var errStore = errors.New("idem: store")

func storeErr(op string, err error) error { return fmt.Errorf("%w: %s: %w", errStore, op, err) }

// holds reports whether d is subject to holding: it has an aggregate and
// holding is on.
func (in *Inbox[Tx]) holds(d *broker.Delivery) bool {
	return !in.o.NoHold && d.Message.Headers.Get(HeaderAggregateID) != ""
}

// run runs h for d in tx, after d's claim c, behind the version checks;
// t is d's transaction's run.
func (in *Inbox[Tx]) run(ctx context.Context, tx Tx, d *broker.Delivery, h Handler[Tx], c seam.Claimed, t *txRun[Tx]) (Result, error) {
	r, ok, err := in.prepare(ctx, tx, d, c)
	if err != nil || !ok {
		return r, err
	}
	return in.call(ctx, tx, d, h, in.checks(true), t)
}

// call runs h for d in tx behind the version checks c, in a "handler"
// span, turning a panic into an error. It returns what it did as a result
// (ResultApplied; ResultStale when h returns SkipStale or the check finds
// d stale; ResultEarly or ResultParked when the check holds d) and only
// failures as errors. t is tx's run (nil: a replay's).
func (in *Inbox[Tx]) call(ctx context.Context, tx Tx, d *broker.Delivery, h Handler[Tx], c checks, t *txRun[Tx]) (r Result, err error) {
	ctx, span := childSpan(ctx, "handler")
	defer func() {
		if p := recover(); p != nil {
			r, err = 0, fmt.Errorf("idem: handler panic: %v\n%s", p, debug.Stack())
		}
		endChild(span, err)
	}()
	if c.table == (VersionTable{}) {
		return result(h(ctx, tx, d))
	}
	return in.checkVersion(ctx, tx, d, c, h, t)
}

// result is what a handler that returned err did: ResultApplied, or
// ResultStale for SkipStale; or it failed.
func result(err error) (Result, error) {
	switch {
	case err == nil:
		return ResultApplied, nil
	case errors.Is(err, SkipStale):
		return ResultStale, nil
	default:
		return 0, err
	}
}
