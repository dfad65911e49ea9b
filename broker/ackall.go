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
	errs := make([]error, len(ds))
	if s := oneSub(ds); s != nil {
		// The common case, every delivery of one subscription: no map.
		at := make([]int, len(ds))
		for i := range at {
			at[i] = i
		}
		if s.ackAll(ctx, ds, at, errs) {
			return errs
		}
		return nil
	}
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
		if s.ackAll(ctx, ds, bySub[s], errs) {
			failed = true
		}
	}
	if !failed {
		return nil
	}
	return errs
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

// ackAll acks ds[at...], all of s, with one SendAcks, setting their
// errors in errs. It reports whether one failed.
func (s *Subscription) ackAll(ctx context.Context, ds []*Delivery, at []int, errs []error) bool {
	// One AckAll at a time per subscription holds several deliveries'
	// locks, so that two of them cannot wait for each other. Everything
	// else holds at most one, and takes it before s.mu as this does.
	s.ackMu.Lock()
	defer s.ackMu.Unlock()
	// d.ackAllAt (guarded by s.ackMu) marks the deliveries this call
	// holds: 1 + the index of the first copy of each in ds.
	locked := make([]*Delivery, 0, len(at))
	live := make([]int, 0, len(at)) // indexes into ds, unsettled, each delivery once
	for _, i := range at {
		d := ds[i]
		if d.ackAllAt != 0 {
			continue // a copy of a delivery seen before: its outcome below
		}
		d.ackAllAt = i + 1
		d.mu.Lock()
		locked = append(locked, d)
		if !d.settled {
			live = append(live, i)
		}
	}
	defer func() {
		for _, d := range locked {
			d.ackAllAt = 0
			d.mu.Unlock()
		}
	}()
	if len(live) > 0 {
		ctx, cancel := s.settleCtx(ctx)
		s.sendAcks(ctx, ds, live, errs)
		cancel()
	}
	failed := false
	for _, i := range at { // copies share the outcome of their first
		if j := ds[i].ackAllAt - 1; j != i {
			errs[i] = errs[j]
		}
		failed = failed || errs[i] != nil
	}
	return failed
}

// sendAcks acks ds[live...] (locked, unsettled) with one driver call.
func (s *Subscription) sendAcks(ctx context.Context, ds []*Delivery, live []int, errs []error) {
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
		derr := s.d.SendAcks(ctx, ids)
		var be *driver.BatchError
		if errors.As(derr, &be) && len(be.Errs) == len(ids) {
			each = be.Errs
		} else {
			all = derr
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
		} else {
			acked++
		}
		if err == nil || errors.Is(err, ErrLockLost) {
			d.settled = true
		}
		errs[i] = err
	}
	s.tel.settledN(ctx, settleAck, acked)
}
