package idem

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/store"
)

// HandleBatch processes ds in one transaction, with Handle's guarantees for
// each delivery: it claims every message (in message-ID order, so that
// concurrent batches cannot deadlock on each other's claims), runs h for
// each claimed one in the order given, commits, and then acknowledges all
// of them. When h fails for one delivery, the transaction is rolled back,
// that delivery is settled as Handle would settle it, and the batch is tried
// again without it, so one failing message does not sink the rest.
//
// It returns the result of each delivery, in the order of ds, and an error
// joining the failures of individual deliveries (handler and store errors,
// ErrAckAfterCommit); the error is nil when every delivery was applied,
// found to be a duplicate or stale, or parked.
func (in *Inbox[Tx]) HandleBatch(ctx context.Context, ds []*broker.Delivery, h Handler[Tx]) ([]Result, error) {
	in.logStart()
	res, err := in.handleBatch(ctx, ds, h)
	in.tel.batch(ctx, res)
	return res, err
}

func (in *Inbox[Tx]) handleBatch(ctx context.Context, ds []*broker.Delivery, h Handler[Tx]) ([]Result, error) {
	in.purgeDue(ctx)
	res := make([]Result, len(ds))
	pending, errs := in.checkIDs(ctx, ds, res)
	for len(pending) > 0 {
		batch := pick(ds, pending)
		outs, failed, err := in.tryBatch(ctx, batch, h)
		if errors.Is(err, errStore) && broker.IsPermanent(err) {
			// The store refused a value of one of the messages: handle
			// them one by one, which settles that one for good.
			for _, i := range pending {
				r, err := in.handle(ctx, ds[i], h)
				res[i] = r
				errs = append(errs, err)
			}
			return res, errors.Join(errs...)
		}
		if errors.Is(err, errStore) {
			for _, i := range pending {
				res[i] = ResultFailed
			}
			return res, errors.Join(append(errs, in.abort(ctx, batch, err))...)
		}
		if err != nil {
			r, ferr := in.fail(ctx, batch[failed], err)
			res[pending[failed]] = r
			errs = append(errs, ferr)
			pending = slices.Delete(pending, failed, failed+1)
			continue
		}
		for k := range batch {
			in.count(outs[k])
			res[pending[k]] = outs[k]
		}
		errs = append(errs, in.ackAll(ctx, batch)...)
		break
	}
	return res, errors.Join(errs...)
}

// tryBatch runs one attempt at the batch. On a handler error it returns the
// index of the failing delivery; on a store error, an error matching
// errStore. The transaction is committed only when every handler succeeded.
func (in *Inbox[Tx]) tryBatch(ctx context.Context, ds []*broker.Delivery, h Handler[Tx]) ([]Result, int, error) {
	tx, began, claimed, err := in.beginClaim(ctx, ds)
	if err != nil {
		return nil, 0, storeErr("begin and claim", err)
	}
	outs := make([]Result, len(ds))
	if !began { // duplicates all, and nothing was begun
		for i := range outs {
			outs[i] = ResultDuplicate
		}
		return outs, 0, nil
	}
	rollback := func() { in.rollback(ctx, tx) }
	for i, d := range ds {
		out, err := in.run(ctx, tx, d, h, claimed[i])
		if err != nil {
			rollback()
			return nil, i, err
		}
		outs[i] = out
	}
	if err := in.commit(ctx, tx); err != nil {
		return nil, 0, storeErr("commit", err)
	}
	return outs, 0, nil
}

// beginClaim begins the transaction of ds and claims them in it: their
// distinct IDs in ID order (so that concurrent batches cannot deadlock on
// each other's claims), with the held check for those subject to holding.
// It answers per delivery: of several copies of an ID in ds, only the
// first can be New. If began is false nothing was claimed.
func (in *Inbox[Tx]) beginClaim(ctx context.Context, ds []*broker.Delivery) (tx Tx, began bool, claims []store.Claimed, err error) {
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(ds[a].Message.ID, ds[b].Message.ID) })
	r := store.ClaimRequest{Consumer: in.consumer, At: in.o.Now()}
	aggs := make([]string, 0, len(ds))
	held := false
	pos := make(map[string]int, len(ds)) // ID -> index in r.IDs
	for _, i := range order {
		d := ds[i]
		if _, dup := pos[d.Message.ID]; dup {
			continue
		}
		pos[d.Message.ID] = len(r.IDs)
		r.IDs = append(r.IDs, d.Message.ID)
		agg := ""
		if in.holds(d) {
			agg, held = d.Message.Headers[HeaderAggregateID], true
		}
		aggs = append(aggs, agg)
	}
	if held {
		r.Aggregates = aggs
	}
	cctx, span := childSpan(ctx, "inbox claim")
	tx, began, got, err := in.store.BeginClaim(cctx, r)
	endChild(span, err)
	if err != nil || !began {
		return tx, false, nil, err
	}
	claims = make([]store.Claimed, len(ds))
	for i, d := range ds {
		if j, ok := pos[d.Message.ID]; ok {
			claims[i] = got[j]
			delete(pos, d.Message.ID) // later copies are duplicates
		}
	}
	return tx, true, claims, nil
}
