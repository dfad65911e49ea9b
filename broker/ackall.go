package broker

import (
	"context"
	"errors"

	"github.com/wary-go/wary/broker/driver"
)

// AckAll acknowledges ds as Ack does each, with one driver call per
// subscription (one offset commit on Kafka, one multiple ack on RabbitMQ,
// batches of ten on SQS). It returns nil when every delivery is acked (or
// was settled), else one error per delivery in the order of ds, nil for
// those acked, each what Ack would have returned alone.
func AckAll(ctx context.Context, ds []*Delivery) []error {
	if len(ds) == 1 {
		if err := ds[0].Ack(ctx); err != nil {
			return []error{err}
		}
		return nil
	}
	if s := oneSub(ds); s != nil {
		// The common case, every delivery of one subscription: no map,
		// and no slice but the driver's IDs, unless an ack fails.
		var buf [ackAllStack]int
		at := buf[:0]
		if len(ds) > len(buf) {
			at = make([]int, 0, len(ds))
		}
		for i := range ds {
			at = append(at, i)
		}
		var errs []error
		if s.ackAll(ctx, ds, at, &errs) {
			return errs
		}
		return nil
	}
	errs := make([]error, len(ds))
	failed := false
	bySub := map[*Subscription][]int{}
	var subs []*Subscription
	for i, d := range ds {
		if d.sub == nil {
			errs[i] = d.Ack(ctx)
			failed = failed || errs[i] != nil
			continue
		}
		if _, ok := bySub[d.sub]; !ok {
			subs = append(subs, d.sub)
		}
		bySub[d.sub] = append(bySub[d.sub], i)
	}
	for _, s := range subs {
		if s.ackAll(ctx, ds, bySub[s], &errs) {
			failed = true
		}
	}
	if !failed {
		return nil
	}
	return errs
}

// ackAllStack is how many deliveries AckAll tracks in arrays on its
// stack, allocating nothing.
const ackAllStack = 128

// setErr sets (*errs)[i] to err (not nil), allocating *errs, one entry per
// delivery of an AckAll of n, at the first error.
func setErr(errs *[]error, n, i int, err error) {
	if *errs == nil {
		*errs = make([]error, n)
	}
	(*errs)[i] = err
}

// oneSub returns the subscription of every delivery of ds, or nil when
// they are not all of one.
func oneSub(ds []*Delivery) *Subscription {
	if len(ds) == 0 {
		return nil
	}
	s := ds[0].sub
	for _, d := range ds[1:] {
		if d.sub != s {
			return nil
		}
	}
	return s
}

// ackAll acks ds[at...] (at increasing), all of s, with one SendAcks,
// setting their errors in *errs (setErr). It reports whether one failed.
func (s *Subscription) ackAll(ctx context.Context, ds []*Delivery, at []int, errs *[]error) bool {
	// One AckAll at a time per subscription holds several deliveries'
	// locks, so that two of them cannot wait for each other. Everything
	// else holds at most one, and takes it before s.mu as this does.
	s.ackMu.Lock()
	defer s.ackMu.Unlock()
	// d.ackAllAt (guarded by s.ackMu) marks the deliveries this call
	// holds (locked): 1 + the index of the first copy of each in ds.
	var buf [ackAllStack]int
	live := buf[:0] // indexes into ds, unsettled, each delivery once
	if len(at) > len(buf) {
		live = make([]int, 0, len(at))
	}
	for _, i := range at {
		d := ds[i]
		if d.ackAllAt != 0 {
			continue // a copy of a delivery seen before: its outcome below
		}
		d.ackAllAt = int32(i + 1)
		d.mu.Lock()
		if !d.settled {
			live = append(live, i)
		}
	}
	defer func() {
		for _, i := range at { // the first copy of each unlocks it
			if d := ds[i]; int(d.ackAllAt) == i+1 {
				d.ackAllAt = 0
				d.mu.Unlock()
			}
		}
	}()
	if len(live) > 0 {
		ctx, cancel := s.settleCtx(ctx)
		s.sendAcks(ctx, ds, live, errs)
		cancel()
	}
	if *errs == nil {
		return false
	}
	failed := false
	for _, i := range at { // copies share the outcome of their first
		if j := int(ds[i].ackAllAt) - 1; j != i {
			(*errs)[i] = (*errs)[j]
		}
		failed = failed || (*errs)[i] != nil
	}
	return failed
}

// sendAcks acks ds[live...] (locked, unsettled) with one driver call,
// setting the errors in *errs (setErr).
func (s *Subscription) sendAcks(ctx context.Context, ds []*Delivery, live []int, errs *[]error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var all error
	var each []error
	switch {
	case s.closed:
		all = newError("ack", driver.Closed, false, errSubClosed)
	case ctx.Err() != nil:
		all = wrapErr("ack", s.d.Classify, ctx.Err())
	default:
		ids := make([]driver.AckID, len(live))
		for k, i := range live {
			ids[k] = ds[i].ackID[0]
		}
		all = s.d.SendAcks(ctx, ids)
		if all != nil {
			if be := (*driver.BatchError)(nil); errors.As(all, &be) && len(be.Errs) == len(ids) {
				all, each = nil, be.Errs
			}
		}
	}
	acked := 0
	for k, i := range live {
		d, err := ds[i], all
		if each != nil {
			err = each[k]
		}
		if err = wrapErr("ack", s.d.Classify, err); err != nil {
			d.ackFailed = true
			setErr(errs, len(ds), i, err)
		} else {
			acked++
		}
		if err == nil || errors.Is(err, ErrLockLost) {
			d.settled = true
		}
	}
	s.tel.settledN(ctx, settleAck, acked)
}
