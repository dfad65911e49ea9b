package idem

import (
	"context"
	"errors"
	"fmt"
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
// The returned error joins the failures of individual deliveries (handler
// errors, ErrAckAfterCommit); it is nil when every delivery was processed,
// found to be a duplicate, or parked.
func (in *Inbox[Tx]) HandleBatch(ctx context.Context, ds []*broker.Delivery, h Handler[Tx]) error {
	var errs []error
	pending := make([]*broker.Delivery, 0, len(ds))
	for _, d := range ds {
		if d.Message.ID == "" {
			errs = append(errs, in.fail(ctx, d, broker.Permanent(ErrNoID)))
			continue
		}
		pending = append(pending, d)
	}
	for len(pending) > 0 {
		outs, failed, err := in.tryBatch(ctx, pending, h)
		if errors.Is(err, errStore) {
			return errors.Join(append(errs, in.abort(ctx, pending, err))...)
		}
		if err != nil {
			errs = append(errs, in.fail(ctx, pending[failed], err))
			pending = slices.Delete(slices.Clone(pending), failed, failed+1)
			continue
		}
		for i, d := range pending {
			in.count(outs[i])
			if err := in.ack(ctx, d); err != nil {
				errs = append(errs, err)
			}
		}
		break
	}
	return errors.Join(errs...)
}

// tryBatch runs one attempt at the batch. On a handler error it returns the
// index of the failing delivery; on a store error, an error matching
// errStore. The transaction is committed only when every handler succeeded.
func (in *Inbox[Tx]) tryBatch(ctx context.Context, ds []*broker.Delivery, h Handler[Tx]) ([]outcome, int, error) {
	tx, err := in.store.Begin(ctx)
	if err != nil {
		return nil, 0, storeErr("begin", err)
	}
	rollback := func() { _ = in.store.Rollback(context.WithoutCancel(ctx), tx) }

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
			rollback()
			return nil, 0, storeErr("claim", err)
		}
		for i, d := range ds {
			claimed[i] = got[d.Message.ID]
		}
	} else {
		for _, i := range order {
			ok, err := in.store.Claim(ctx, tx, in.consumer, ds[i].Message.ID, now)
			if err != nil {
				rollback()
				return nil, 0, storeErr("claim", err)
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

	outs := make([]outcome, len(ds))
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

// RunBatch receives up to size deliveries at a time from sub and processes
// each batch with HandleBatch, until ctx is done (it then returns nil) or
// receiving fails with an error that is not transient. Failures of
// individual deliveries are logged, not returned: they were settled.
func (in *Inbox[Tx]) RunBatch(ctx context.Context, sub *broker.Subscription, size int, h Handler[Tx]) error {
	failures := 0
	for {
		ds, err := sub.Receive(ctx, size)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, broker.ErrRetryable):
				failures++
				if !sleep(ctx, broker.Backoff{Max: 5e9}.Delay(failures)) {
					return nil
				}
				continue
			default:
				return fmt.Errorf("idem: receive: %w", err)
			}
		}
		failures = 0
		if err := in.HandleBatch(ctx, ds, h); err != nil {
			in.o.Logger.Debug("idem: batch had failures", "consumer", in.consumer, "error", err.Error())
		}
	}
}
