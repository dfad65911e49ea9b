package idem

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/store"
)

// BatchHandler applies the effects of several deliveries inside tx, the
// transaction that also claims them in the inbox, so that it can write
// them together: one multi-row statement, or one pgx.Batch. It gets only
// the deliveries to apply, in the order received: the inbox has already
// left out duplicates (claimed before, or earlier in the same batch),
// messages held behind a parked message of their aggregate, and messages
// whose ID it cannot keep. Like a Handler, it writes through tx only, must
// not commit, roll back or settle, and its error rolls the whole
// transaction back.
//
// It reports the outcome of single deliveries with *DeliveryError: a
// DeliveryError with SkipStale marks a delivery stale (it applied nothing
// for it; the transaction still commits, and that delivery's result is
// ResultStale), and one with any other error marks that delivery failed.
// Several are returned joined with errors.Join. See Inbox.HandleBatchAll for
// how failures are settled.
type BatchHandler[Tx any] func(ctx context.Context, tx Tx, ds []*broker.Delivery) error

// DeliveryError, returned by a BatchHandler (alone, wrapped, or joined with
// others by errors.Join), says that Err is the outcome of one delivery of
// the batch rather than of the whole batch.
type DeliveryError struct {
	Delivery *broker.Delivery
	Err      error
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("message %q: %v", e.Delivery.Message.ID, e.Err)
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// WrapBatchAll adapts the inbox to broker.Subscription.RunBatch: each batch
// goes through HandleBatchAll with bh. HandleBatchAll settles every
// delivery itself.
func (in *Inbox[Tx]) WrapBatchAll(bh BatchHandler[Tx]) broker.BatchHandler {
	return func(ctx context.Context, ds []*broker.Delivery) error {
		_, err := in.HandleBatchAll(ctx, ds, bh)
		return err
	}
}

// HandleBatchAll is HandleBatch for a handler that takes the batch at
// once: in one transaction it claims every delivery of ds (in message-ID
// order, as HandleBatch), calls bh once with those to apply, commits, and
// then acknowledges all of ds. Each delivery gets a Result, in the order
// of ds, as Handle would give it: ResultApplied for those bh was given
// (ResultStale for those it marked with SkipStale), ResultDuplicate,
// ResultHeld, and ResultDeadLettered or ResultParked for IDs the inbox
// cannot keep (ErrInvalidID, store.ErrData).
//
// When bh fails, the transaction is rolled back, with the claims and every
// write of bh, and nothing is acknowledged yet:
//
//   - If the error names deliveries (*DeliveryError), each of those is
//     settled as Handle settles a handler failure (nacked with backoff;
//     dead-lettered if the error is marked with broker.Permanent; a
//     *ParkError is retried, then parked), and the rest of the batch is
//     tried again without them, in a new transaction.
//   - Otherwise the inbox cannot tell which message failed, so it falls
//     back to isolating them: each delivery is handled alone, in its own
//     transaction, by bh with a batch of one. The good messages are
//     applied and the failing ones settled as above; a failure that is not
//     the messages' (a lost connection) costs a transaction per message
//     for that batch.
//
// A store failure (begin, claim, commit) nacks the whole batch, as
// HandleBatch does. The error returned joins the failures of single
// deliveries, as HandleBatch's; it is nil when every delivery was applied,
// stale, a duplicate, held or parked.
func (in *Inbox[Tx]) HandleBatchAll(ctx context.Context, ds []*broker.Delivery, bh BatchHandler[Tx]) ([]Result, error) {
	in.logStart()
	res, err := in.handleBatchAll(ctx, ds, bh)
	in.tel.batch(ctx, res)
	return res, err
}

func (in *Inbox[Tx]) handleBatchAll(ctx context.Context, ds []*broker.Delivery, bh BatchHandler[Tx]) ([]Result, error) {
	in.purgeDue(ctx)
	res := make([]Result, len(ds))
	pending, errs := in.checkIDs(ctx, ds, res)
	for len(pending) > 0 {
		batch := pick(ds, pending)
		outs, failed, err := in.tryAll(ctx, batch, bh)
		switch {
		case err == nil:
			for k, out := range outs {
				in.count(out)
				res[pending[k]] = out
			}
			return res, errors.Join(append(errs, in.ackAll(ctx, batch)...)...)
		case errors.Is(err, errStore) && broker.IsPermanent(err) && len(batch) == 1:
			r, err := in.poison(ctx, batch[0], err)
			res[pending[0]] = r
			return res, errors.Join(append(errs, err)...)
		case errors.Is(err, errStore) && broker.IsPermanent(err), !errors.Is(err, errStore) && len(failed) == 0 && len(batch) > 1:
			// The store refused a value of one of the messages, or the
			// handler failed without saying for which: one at a time.
			for k, d := range batch {
				r, err := in.handleBatchAll(ctx, []*broker.Delivery{d}, bh)
				res[pending[k]] = r[0]
				errs = append(errs, err)
			}
			return res, errors.Join(errs...)
		case errors.Is(err, errStore):
			for _, i := range pending {
				res[i] = ResultFailed
			}
			return res, errors.Join(append(errs, in.abort(ctx, batch, err))...)
		case len(failed) == 0: // one delivery, failed
			failed = map[int]error{0: err}
		}
		var rest []int
		for k, i := range pending {
			ferr, bad := failed[k]
			if !bad {
				rest = append(rest, i)
				continue
			}
			r, err := in.fail(ctx, ds[i], ferr)
			res[i] = r
			errs = append(errs, err)
		}
		pending = rest
	}
	return res, errors.Join(errs...)
}

// pick returns the deliveries of ds at the indexes given.
func pick(ds []*broker.Delivery, indexes []int) []*broker.Delivery {
	out := make([]*broker.Delivery, len(indexes))
	for k, i := range indexes {
		out[k] = ds[i]
	}
	return out
}

// checkIDs settles the deliveries of ds whose IDs the inbox cannot keep,
// setting their results in res, and returns the indexes of the others.
func (in *Inbox[Tx]) checkIDs(ctx context.Context, ds []*broker.Delivery, res []Result) ([]int, []error) {
	var errs []error
	pending := make([]int, 0, len(ds))
	for i, d := range ds {
		if err := checkID(d.Message.ID); err != nil {
			r, err := in.poison(ctx, d, err)
			res[i] = r
			errs = append(errs, err)
			continue
		}
		pending = append(pending, i)
	}
	return pending, errs
}

// tryAll runs one attempt at the batch with bh. On a handler error it
// returns the failures bh named, by index into ds (none if it named
// none); on a store error, an error matching errStore. The transaction is
// committed only when bh succeeded.
func (in *Inbox[Tx]) tryAll(ctx context.Context, ds []*broker.Delivery, bh BatchHandler[Tx]) ([]Result, map[int]error, error) {
	tx, began, claimed, err := in.beginClaim(ctx, ds)
	if err != nil {
		return nil, nil, storeErr("begin and claim", err)
	}
	outs := make([]Result, len(ds))
	if !began { // duplicates all, and nothing was begun
		for i := range outs {
			outs[i] = ResultDuplicate
		}
		return outs, nil, nil
	}
	rollback := func() { in.rollback(ctx, tx) }
	var apply []*broker.Delivery
	index := map[*broker.Delivery]int{}
	for i, d := range ds {
		r, ok, err := in.prepare(ctx, tx, d, claimed[i])
		if err != nil {
			rollback()
			return nil, nil, err
		}
		outs[i] = r
		if ok {
			outs[i] = ResultApplied
			apply = append(apply, d)
			index[d] = i
		}
	}
	if len(apply) > 0 {
		if err := callAll(ctx, tx, apply, bh); err != nil {
			named, whole := deliveryErrors(err, index)
			failed := map[int]error{}
			for i, e := range named {
				if errors.Is(e, SkipStale) {
					outs[i] = ResultStale
				} else {
					failed[i] = e
				}
			}
			if whole || len(failed) > 0 {
				rollback()
				return nil, failed, err
			}
		}
	}
	if err := in.commit(ctx, tx); err != nil {
		return nil, nil, storeErr("commit", err)
	}
	return outs, nil, nil
}

// callAll runs bh, turning a panic into an error.
func callAll[Tx any](ctx context.Context, tx Tx, ds []*broker.Delivery, bh BatchHandler[Tx]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("idem: batch handler panic: %v\n%s", p, debug.Stack())
		}
	}()
	return bh(ctx, tx, slices.Clip(ds))
}

// deliveryErrors walks err's tree for the *DeliveryError values naming a
// delivery of the batch (index gives their positions). whole reports an
// error of the batch as a whole: a leaf that is no *DeliveryError, or one
// naming a delivery that is not in the batch.
func deliveryErrors(err error, index map[*broker.Delivery]int) (named map[int]error, whole bool) {
	named = map[int]error{}
	var walk func(error)
	walk = func(err error) {
		var de *DeliveryError
		switch u := err.(type) {
		case *DeliveryError:
			de = u
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
			return
		case interface{ Unwrap() error }:
			if next := u.Unwrap(); next != nil {
				walk(next)
				return
			}
		}
		if de == nil || de.Err == nil {
			whole = true
			return
		}
		i, ok := index[de.Delivery]
		if !ok {
			whole = true
			return
		}
		named[i] = de.Err
	}
	walk(err)
	return named, whole
}

// ackAll acknowledges ds after their transaction committed, with one
// driver call (broker.AckAll), and returns the failures (each matching
// ErrAckAfterCommit).
func (in *Inbox[Tx]) ackAll(ctx context.Context, ds []*broker.Delivery) []error {
	if len(ds) == 0 {
		return nil
	}
	sctx, cancel := settleCtx(ctx, ds[0])
	defer cancel()
	var errs []error
	for i, err := range broker.AckAll(sctx, ds) {
		if err != nil {
			errs = append(errs, in.ackFailed(ds[i], err))
		}
	}
	return errs
}

// prepare is what runs in d's transaction after its claim c and before
// its handler: a duplicate is reported (ok false); a message held behind a
// parked one of its aggregate is parked too (ResultHeld, ok false); a
// message with failed attempts has them forgotten. ok true: run the
// handler.
func (in *Inbox[Tx]) prepare(ctx context.Context, tx Tx, d *broker.Delivery, c store.Claimed) (r Result, ok bool, err error) {
	if !c.New {
		return ResultDuplicate, false, nil
	}
	if c.Held {
		now := in.o.Now()
		p := parkedFrom(in.consumer, d, "held behind a parked message of aggregate "+d.Message.Headers[HeaderAggregateID], 0, now, now)
		if err := in.store.Park(ctx, tx, p); err != nil {
			return 0, false, storeErr("park", err)
		}
		return ResultHeld, false, nil
	}
	if d.Attempt > 1 {
		if err := in.store.ClearFailure(ctx, tx, in.consumer, d.Message.ID); err != nil {
			return 0, false, storeErr("clear failure", err)
		}
	}
	return 0, true, nil
}
