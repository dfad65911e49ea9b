package keys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/wary-go/wary/internal/wotel"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/internal/failpoint"
	"github.com/wary-go/wary/idem/internal/names"
	"github.com/wary-go/wary/idem/internal/seam"
)

// Contract describes how an external provider (a payment gateway, a
// mailer) treats idempotency keys. It decides when a call may be sent again.
type Contract struct {
	// Provider names the provider ("payments"); keys are unique per
	// provider. Same characters as a consumer name.
	Provider string
	// Retention is how long the provider remembers a key after it first
	// saw it (0: for ever). A retry later than Retention minus Margin could
	// run the operation a second time, so it is not sent: the call goes to
	// reconciliation instead.
	Retention time.Duration
	// Margin is taken off Retention against clock skew and slow calls
	// (default a tenth of Retention).
	Margin time.Duration
	// Replays: a call with a key the provider has seen returns the first
	// call's outcome instead of running again. Only then is a call whose
	// outcome is unknown sent again; otherwise it goes to reconciliation,
	// since a retry could not tell what happened.
	Replays bool
}

// Errors of a Caller.
var (
	// ErrNotStaged: Call for a key that was never staged (or whose
	// staging transaction has not committed).
	ErrNotStaged = errors.New("idem: idempotency key not staged")
	// ErrConflict: Stage of an existing key with a different intent;
	// one key must name one operation.
	ErrConflict = errors.New("idem: idempotency key staged with another intent")
	// ErrCallFailed: the call failed for good (now or before).
	ErrCallFailed = errors.New("idem: external call failed")
	// ErrOutcomeUnknown: the call failed without saying whether it
	// happened; Call retries it later if the contract allows.
	ErrOutcomeUnknown = errors.New("idem: outcome of the external call unknown")
	// ErrReconcile: the outcome is unknown and a retry is not safe (the
	// provider does not replay, or has forgotten the key): the key waits
	// for Reconcile.
	ErrReconcile = errors.New("idem: external call needs reconciliation")
	// ErrInFlight: another caller holds the key.
	ErrInFlight = errors.New("idem: external call in flight")
)

// Options configures a Caller. Nil means defaults.
type Options struct {
	// CallTimeout bounds a call and is how long a started call holds its
	// key (default 1m): after it, with no outcome recorded, the caller is
	// presumed dead and the outcome unknown.
	CallTimeout time.Duration
	// Telemetry's Logger receives unknown outcomes, and Now is the
	// caller's clock (leases, retention). A Caller reports no spans or
	// metrics.
	broker.Telemetry
}

// CallFunc performs an external call with an idempotency key: it must send
// key to the provider (an Idempotency-Key header, a request ID) so that the
// provider recognises a retry. It returns the provider's answer; an error
// marked with broker.Permanent means the operation certainly did not and
// will not happen (a declined card), any other error leaves the outcome
// unknown.
type CallFunc func(ctx context.Context, key string, intent []byte) ([]byte, error)

// Caller makes external calls safe to retry with idempotency keys stored in
// the database, for one provider. See the package documentation.
type Caller[Tx any] struct {
	store keyStore[Tx]
	c     Contract
	o     Options
}

// New returns a Caller for the provider c describes, on the store s (an
// idem.Store: a *postgres.Store or a *sqlite.Store; this package cannot
// name idem.Store, as idem imports it).
func New[Tx any](s seam.Provider[Tx], c Contract, opts *Options) (*Caller[Tx], error) {
	st, err := check.Part[keyStore[Tx]](s, "the idempotency keys' part")
	if err != nil {
		return nil, err
	}
	if err := names.ValidateProvider(c.Provider); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	oc := check.Options{What: fmt.Sprintf("provider %q: key contract and options", c.Provider)}
	oc.Duration("Retention", c.Retention, false)
	oc.Duration("Margin", c.Margin, false)
	if c.Retention > 0 && c.Margin >= c.Retention {
		oc.Bad("Margin", "is not below Retention")
	}
	oc.Duration("CallTimeout", o.CallTimeout, false)
	if err := oc.Err(); err != nil {
		return nil, err
	}
	if c.Margin == 0 {
		c.Margin = c.Retention / 10
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = time.Minute
	}
	t := &o.Telemetry
	wotel.Defaults(&t.Logger, &t.TracerProvider, &t.MeterProvider, &t.Now)
	return &Caller[Tx]{store: st, c: c, o: o}, nil
}

// Stage stores key with its intent in tx, the transaction that decides the
// call (and commits it with the rest of the decision). Staging a key again
// returns the stored record; with a different intent it fails with
// ErrConflict. Make the call with Call after tx commits, never before.
func (k *Caller[Tx]) Stage(ctx context.Context, tx Tx, key string, intent []byte) (Record, error) {
	if err := Validate(key); err != nil {
		return Record{}, err
	}
	if intent == nil {
		intent = []byte{}
	}
	rec, created, err := k.store.StageKey(ctx, tx, k.c.Provider, key, intent, k.o.Now())
	if err != nil {
		return rec, fmt.Errorf("idem: stage key %q: %w", key, err)
	}
	if !created && !bytes.Equal(rec.Intent, intent) {
		return rec, fmt.Errorf("%w: provider %q, key %q", ErrConflict, k.c.Provider, key)
	}
	return rec, nil
}

// Get reads a key.
func (k *Caller[Tx]) Get(ctx context.Context, key string) (Record, bool, error) {
	return k.store.GetKey(ctx, k.c.Provider, key)
}

// Call makes the staged call for key, or returns what is known of it:
//
//   - succeeded before: the stored record, without calling;
//   - failed before: ErrCallFailed, without calling;
//   - staged: the call is started (the start is committed first), run
//     with the key, and its outcome recorded;
//   - outcome unknown (an error that is not permanent, or a caller that
//     died during the call): the call is sent again with the same key only
//     if the provider replays outcomes and still remembers the key
//     (Contract); otherwise the key is marked Unknown and Call
//     returns ErrReconcile.
//
// An unknown outcome returns ErrOutcomeUnknown. A call in flight elsewhere
// returns ErrInFlight, as does a call that outlived its lease
// (CallTimeout) while another caller started the key again: its outcome is
// not recorded, and the record returned is the other caller's. The outcome of a call made is recorded although ctx
// ends during the call, within 10 seconds: a store that does not answer
// by then fails Call with context.DeadlineExceeded, and the key stays in
// flight until its lease (CallTimeout) runs out.
func (k *Caller[Tx]) Call(ctx context.Context, key string, call CallFunc) (Record, error) {
	rec, ok, err := k.store.GetKey(ctx, k.c.Provider, key)
	if err != nil {
		return rec, fmt.Errorf("idem: key %q: %w", key, err)
	}
	if !ok {
		return rec, fmt.Errorf("%w: provider %q, key %q", ErrNotStaged, k.c.Provider, key)
	}
	now := k.o.Now()
	switch rec.State {
	case Succeeded:
		return rec, nil
	case Failed:
		return rec, fmt.Errorf("%w: provider %q, key %q: %s", ErrCallFailed, k.c.Provider, key, rec.Error)
	case InFlight:
		if rec.LeaseUntil.After(now) {
			return rec, fmt.Errorf("%w: provider %q, key %q, until %s", ErrInFlight, k.c.Provider, key, rec.LeaseUntil.Format(time.RFC3339))
		}
		fallthrough
	case Unknown:
		if why := k.unsafeRetry(rec, now); why != "" {
			if rec.State == InFlight {
				if _, err := k.store.FinishKeyCall(ctx, k.c.Provider, key, rec.Attempts, Outcome{State: Unknown, Error: why}, now); err != nil {
					return rec, err
				}
				rec.State = Unknown
			}
			return rec, fmt.Errorf("%w: provider %q, key %q: %s", ErrReconcile, k.c.Provider, key, why)
		}
	}
	lease := now.Add(k.o.CallTimeout)
	started, err := k.store.StartKeyCall(ctx, k.c.Provider, key, rec.Attempts, now, lease)
	if err != nil {
		return rec, fmt.Errorf("idem: start call %q: %w", key, err)
	}
	if !started {
		return rec, fmt.Errorf("%w: provider %q, key %q (another caller started it)", ErrInFlight, k.c.Provider, key)
	}
	rec.State, rec.Attempts, rec.LastCallAt, rec.LeaseUntil = InFlight, rec.Attempts+1, now, lease
	if rec.FirstCallAt.IsZero() {
		rec.FirstCallAt = now
	}
	cctx, cancel := context.WithTimeout(ctx, k.o.CallTimeout)
	res, cerr := safeCall(cctx, call, key, rec.Intent)
	cancel()
	if after := failpoint.AfterCall(ctx); after != nil {
		if err := after(key); err != nil {
			return rec, err
		}
	}
	o := Outcome{State: Succeeded, Result: res}
	switch {
	case cerr == nil:
	case broker.IsPermanent(cerr):
		o = Outcome{State: Failed, Error: cerr.Error()}
	default:
		o = Outcome{State: Unknown, Error: cerr.Error()}
	}
	at := k.o.Now()
	// Recorded although ctx ended (the call was made), within
	// seam.DetachTimeout: a store that does not answer leaves the key in
	// flight, for its lease to run out, rather than hold the caller.
	fctx, cancel := seam.Detach(ctx)
	recorded, err := k.store.FinishKeyCall(fctx, k.c.Provider, key, rec.Attempts, o, at)
	cancel()
	if err != nil {
		return rec, fmt.Errorf("idem: record outcome of %q (%s): %w", key, o.State, err)
	}
	if !recorded {
		// The lease ran out during the call and another caller started the
		// key again: its attempt owns the record, and this outcome is not
		// the key's. Report the key as that caller left it.
		if cur, ok, gerr := k.store.GetKey(ctx, k.c.Provider, key); gerr == nil && ok {
			rec = cur
		}
		return rec, fmt.Errorf("%w: provider %q, key %q: the outcome of attempt %d (%s) was not recorded: the lease (CallTimeout) ran out during the call and another caller started it again",
			ErrInFlight, k.c.Provider, key, rec.Attempts, o.State)
	}
	rec.State, rec.Result, rec.Error = o.State, o.Result, o.Error
	switch o.State {
	case Failed:
		rec.DoneAt = at
		return rec, fmt.Errorf("%w: provider %q, key %q: %w", ErrCallFailed, k.c.Provider, key, cerr)
	case Unknown:
		k.o.Logger.Warn("idem: external call outcome unknown", slog.String("provider", k.c.Provider), slog.String("key", key),
			slog.Int("attempt", rec.Attempts), slog.String("error", cerr.Error()))
		return rec, fmt.Errorf("%w: provider %q, key %q: %w", ErrOutcomeUnknown, k.c.Provider, key, cerr)
	}
	rec.DoneAt = at
	return rec, nil
}

// unsafeRetry says why a call with an unknown outcome may not be sent
// again, or "" if it may.
func (k *Caller[Tx]) unsafeRetry(rec Record, now time.Time) string {
	if !k.c.Replays {
		return "the provider does not replay outcomes, so a retry cannot tell what happened"
	}
	if k.c.Retention > 0 && !rec.FirstCallAt.IsZero() && !now.Before(rec.FirstCallAt.Add(k.c.Retention-k.c.Margin)) {
		return fmt.Sprintf("the provider may have forgotten the key (first sent %s, kept %s)", rec.FirstCallAt.Format(time.RFC3339), k.c.Retention)
	}
	return ""
}

func safeCall(ctx context.Context, call CallFunc, key string, intent []byte) (res []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("idem: call panic: %v\n%s", p, debug.Stack())
		}
	}()
	return call(ctx, key, intent)
}

// CallStaged calls every key that is staged and never called (a caller
// died between committing the intent and calling), and every key with an
// unknown outcome that may be retried, up to limit keys (all if limit is
// not positive). It returns how many calls succeeded and the errors of the
// others.
func (k *Caller[Tx]) CallStaged(ctx context.Context, call CallFunc, limit int) (int, error) {
	recs, err := k.store.ListKeys(ctx, Filter{Provider: k.c.Provider, States: []State{Staged, InFlight, Unknown}, Limit: limit})
	if err != nil {
		return 0, err
	}
	var errs []error
	ok := 0
	for _, rec := range recs {
		if rec.State != Staged && k.unsafeRetry(rec, k.o.Now()) != "" {
			continue // for Reconcile
		}
		if rec.State == InFlight && rec.LeaseUntil.After(k.o.Now()) {
			continue
		}
		if _, err := k.Call(ctx, rec.Key, call); err != nil {
			errs = append(errs, err)
		} else {
			ok++
		}
	}
	return ok, errors.Join(errs...)
}

// Unresolved lists the keys whose outcome is unknown (Unknown, and
// InFlight past its lease), oldest first, at most limit if positive.
func (k *Caller[Tx]) Unresolved(ctx context.Context, limit int) ([]Record, error) {
	return k.store.ListKeys(ctx, Filter{Provider: k.c.Provider, Unresolved: true, At: k.o.Now(), Limit: limit})
}

// ReconcileFunc asks the provider what became of rec (by its key) and
// says so: Succeeded or Failed with the provider's answer, Staged
// if the provider never saw the key (it will be called again), or
// Unknown (or an error) to leave it for later.
type ReconcileFunc func(ctx context.Context, rec Record) (Outcome, error)

// Reconcile runs f on every unresolved key (see Unresolved) and records
// its answers. It returns how many keys it resolved.
func (k *Caller[Tx]) Reconcile(ctx context.Context, f ReconcileFunc) (int, error) {
	recs, err := k.Unresolved(ctx, 0)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, rec := range recs {
		o, err := f(ctx, rec)
		if err != nil {
			errs = append(errs, fmt.Errorf("idem: reconcile %q: %w", rec.Key, err))
			continue
		}
		if o.State == Unknown || o.State == InFlight {
			continue
		}
		ok, err := k.store.FinishKeyCall(ctx, k.c.Provider, rec.Key, rec.Attempts, o, k.o.Now())
		if err != nil {
			errs = append(errs, err)
		} else if ok {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// Purge deletes succeeded and failed keys done before before, in batches of
// at most batch, and returns how many. Keep keys at least as long as a
// retry of the operation can come (the provider's retention, the inbox's).
func (k *Caller[Tx]) Purge(ctx context.Context, before time.Time, batch int) (int, error) {
	batch = max(batch, 1)
	total := 0
	for {
		n, err := k.store.PurgeKeys(ctx, k.c.Provider, before, batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}
