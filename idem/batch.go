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
	tx, err := in.store.Begin(ctx)
	if err != nil {
		return nil, 0, storeErr("begin", err)
	}
	rollback := func() { in.rollback(ctx, tx) }

	claimed, err := in.claimAll(ctx, tx, ds)
	if err != nil {
		rollback()
		return nil, 0, err
	}
	outs := make([]Result, len(ds))
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

// claimAll claims ds in tx, in message-ID order (so that concurrent batches
// cannot deadlock on each other's claims), and reports which were claimed:
// of several copies of an ID in ds, at most the first. An error matches
// errStore.
func (in *Inbox[Tx]) claimAll(ctx context.Context, tx Tx, ds []*broker.Delivery) ([]bool, error) {
	// Claim in ID order; the first copy of an ID in the batch wins.
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(ds[a].Message.ID, ds[b].Message.ID) })
	claimed := make([]bool, len(ds))
	now := in.o.Now()
	if cm, ok := in.store.(store.ClaimManyer[Tx]); ok {
		// One statement for the whole batch.
		ids := make([]string, 0, len(ds))
		for _, i := range order {
			if id := ds[i].Message.ID; len(ids) == 0 || ids[len(ids)-1] != id {
				ids = append(ids, id)
			}
		}
		got, err := cm.ClaimMany(ctx, tx, in.consumer, ids, now)
		if err != nil {
			return nil, storeErr("claim", err)
		}
		for i, d := range ds {
			claimed[i] = got[d.Message.ID]
		}
	} else {
		for _, i := range order {
			ok, err := in.store.Claim(ctx, tx, in.consumer, ds[i].Message.ID, now)
			if err != nil {
				return nil, storeErr("claim", err)
			}
			claimed[i] = ok
		}
	}
	// A later copy of an ID in the same batch may have sorted first.
	seen := map[string]int{}
	for i, d := range ds {
		if j, dup := seen[d.Message.ID]; dup {
			claimed[i], claimed[j] = false, claimed[j] || claimed[i]
			continue
		}
		seen[d.Message.ID] = i
	}

	return claimed, nil
}
