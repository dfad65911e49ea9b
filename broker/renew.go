package broker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// defaultMaxLockRenewal is RunOptions.MaxLockRenewal's default.
const defaultMaxLockRenewal = time.Hour

// lockHolds refuses a subscription whose broker does not lock a delivery,
// and warns when its lock expires and cannot be extended: Run's check of
// whether a handler keeps its delivery while it runs.
func (s *Subscription) lockHolds() error {
	switch c := s.caps; {
	case c.LockTimeout == capability.LockNone:
		return newError("run", driver.Invalid, false, errors.New("the subscription's broker does not lock a delivery (LockTimeout capability.LockNone, e.g. an SQS VisibilityTimeout of 0): "+
			"each delivery is visible again at once and would be received again, and count toward the delivery limit, while its handler runs; give the queue a lock longer than a handler runs"))
	case c.LockTimeout > 0 && !c.LockExtendable:
		s.logger.Warn("wary: the subscription's lock expires and cannot be extended; a handler running longer than it sees its message delivered again while it runs",
			slog.Duration("lock_timeout", c.LockTimeout))
	}
	return nil
}

// renewLocks keeps the locks of ds while their handler runs, on brokers
// whose locks expire and can be extended (capability.Subscription.LockExtendable with
// a LockTimeout): every half lock timeout it extends each unsettled
// delivery by the lock timeout, until stop is called or MaxLockRenewal has
// passed (a handler stuck past it lets the broker redeliver). stop waits
// for the renewing goroutine.
func (r *runner) renewLocks(ds []*Delivery) (stop func()) {
	caps := r.sub.caps
	if !caps.LockExtendable || caps.LockTimeout <= 0 || r.opts.MaxLockRenewal < 0 {
		return func() {}
	}
	limit := r.opts.MaxLockRenewal
	if limit == 0 {
		limit = defaultMaxLockRenewal
	}
	every := max(caps.LockTimeout/2, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), limit)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, d := range ds {
				if d.Settled() {
					continue
				}
				ectx, ecancel := context.WithTimeout(ctx, every)
				err := d.ExtendLock(ectx, caps.LockTimeout)
				ecancel()
				if err != nil && ctx.Err() == nil {
					r.sub.logger.Debug("wary: lock renewal failed", slog.String("message_id", d.Message.ID), slog.String("error", err.Error()))
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
