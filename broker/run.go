package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Handler processes one delivery. What it leaves unsettled, Run settles: nil
// acks (grouped with acks in flight, see AckAll); an error marked Permanent
// dead-letters (or nacks, where the broker cannot); another error is retried
// (Delivery.Retry), or, once Run is stopping, left unsettled. A panic is an
// error. A failed Ack of the handler's own is retried, never nacked.
type Handler func(ctx context.Context, d *Delivery) error

// RunOptions configures Subscription.Run. Nil means defaults.
type RunOptions struct {
	// Concurrency is the most handlers running at once (default 1); a
	// driver's prefetch follows it, through MaxOutstanding.
	Concurrency int
	// PerKey runs the deliveries of one non-empty Message.Key one after
	// another in arrival order; other keys, and no key, run in parallel.
	PerKey bool
	// MaxOutstanding bounds the received, unsettled deliveries the loop
	// holds (default 2×Concurrency); a driver.Prefetcher holds as many.
	MaxOutstanding int
	// Backoff spaces the retries of a failed handler's delivery (Run's and
	// package idem's inbox's, through Delivery.Retry); default 100ms
	// doubling to 30s. One that cannot be used is ErrInvalid.
	Backoff Backoff
	// MaxLockRenewal bounds how long Run renews the locks of running
	// handlers' deliveries (every half LockTimeout, where LockExtendable);
	// default 1h, negative: off.
	MaxLockRenewal time.Duration
	// DrainTimeout is how long handlers in flight keep a live context once
	// Run's ctx ends (default 10s; negative: none).
	DrainTimeout time.Duration
	// Middleware wraps h, the first outermost: {a, b} runs a, which runs
	// b, which runs h.
	Middleware []Middleware
}

// Middleware wraps a Handler in another (tracing, a timeout, decoding,
// the inbox of package idem). It runs inside Run's loop, so what it
// returns is settled as a Handler's is.
type Middleware func(Handler) Handler

// defaultDrainTimeout is RunOptions.DrainTimeout's default.
const defaultDrainTimeout = 10 * time.Second

// Run receives deliveries and calls h for each until ctx is done, the
// subscription is closed, or receiving fails for good; it returns nil when
// ctx was canceled, an error matching ErrClosed when the subscription was
// closed, and otherwise the receive error. When ctx ends it drains: it
// starts nothing more, leaves unsettled the deliveries not yet started (they
// come back in their order), and lets handlers in flight finish for up to
// RunOptions.DrainTimeout, leaving a failed one's delivery unsettled too;
// then their context is canceled. Settlement uses a context of its own.
// Run refuses (ErrInvalid) a subscription whose LockTimeout is
// capability.LockNone, and warns when a lock expires and cannot be
// extended. docs/broker.md says why.
func (s *Subscription) Run(ctx context.Context, h Handler, opts *RunOptions) error {
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	if err := o.Backoff.check("RunOptions.Backoff"); err != nil {
		return err
	}
	for i := len(o.Middleware) - 1; i >= 0; i-- {
		h = o.Middleware[i](h)
	}
	if err := s.lockHolds(); err != nil {
		return err
	}
	if o.Concurrency < 1 {
		o.Concurrency = 1
	}
	if o.MaxOutstanding < o.Concurrency {
		o.MaxOutstanding = 2 * o.Concurrency
	}
	if err := s.setPrefetch(o.MaxOutstanding); err != nil {
		return err
	}
	// Handlers run on a context of their own, canceled by the drain.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &runner{
		sub:         s,
		h:           h,
		opts:        o,
		backoff:     new(o.Backoff),
		ctx:         ctx,
		hctx:        hctx,
		outstanding: make(chan struct{}, o.MaxOutstanding),
		workers:     make(chan struct{}, o.Concurrency),
		keys:        map[string][]*Delivery{},
		acks:        ackGroup{queued: s.ackQueued},
	}
	err := r.loop()
	r.drain(hcancel)
	return err
}

// drain waits for the handlers in flight, canceling their context once
// DrainTimeout has passed.
func (r *runner) drain(hcancel context.CancelFunc) {
	defer hcancel()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	wait := r.opts.DrainTimeout
	if wait == 0 {
		wait = defaultDrainTimeout
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
			r.sub.logger.Warn("wary: handlers still running after the drain timeout; canceling them", slog.Duration("drain_timeout", wait))
		}
	}
	hcancel()
	<-done
}

type runner struct {
	sub         *Subscription
	h           Handler
	opts        RunOptions
	backoff     *Backoff        // opts.Backoff, apart: a delivery holds it, not the runner
	ctx         context.Context // Run's: receiving stops when it ends
	hctx        context.Context // the handlers': live until the drain ends
	outstanding chan struct{}   // one token per unsettled delivery held
	workers     chan struct{}   // one token per running worker goroutine
	wg          sync.WaitGroup

	mu   sync.Mutex
	keys map[string][]*Delivery // active keys: deliveries waiting behind the running one

	acks ackGroup // the acks of concurrent handlers, grouped
}

func (r *runner) loop() error {
	failures := 0
	for {
		// Take one outstanding slot (blocking), then as many more as are free.
		select {
		case r.outstanding <- struct{}{}:
		case <-r.ctx.Done():
			return nil
		}
		n := 1
	more:
		for n < r.opts.MaxOutstanding {
			select {
			case r.outstanding <- struct{}{}:
				n++
			default:
				break more
			}
		}
		ds, err := r.sub.Receive(r.ctx, n)
		for i := len(ds); i < n; i++ {
			<-r.outstanding
		}
		if err != nil {
			switch {
			case r.ctx.Err() != nil:
				return nil
			case errors.Is(err, ErrRetryable):
				failures++
				delay := Backoff{Initial: 50 * time.Millisecond, Max: 5 * time.Second}.Delay(failures)
				r.sub.logger.Warn("wary: receive failed, retrying", slog.Int("failures", failures), slog.Duration("delay", delay), slog.String("error", err.Error()))
				t := time.NewTimer(delay)
				select {
				case <-r.ctx.Done():
					t.Stop()
					return nil
				case <-t.C:
				}
				continue
			default:
				return err
			}
		}
		failures = 0
		for _, d := range ds {
			d.backoff = r.backoff
		}
		for _, d := range ds {
			r.dispatch(d)
		}
	}
}

// stopping reports whether Run's ctx has ended: nothing more starts.
func (r *runner) stopping() bool { return r.ctx.Err() != nil }

// release lets go of a delivery that will not be handled because Run is
// stopping. It stays unsettled: the broker delivers it again once the
// subscription closes or its lock expires, in its place (a nack would
// requeue it behind later messages on a RabbitMQ quorum queue, and break
// the order of its key).
func (r *runner) release() {
	<-r.outstanding
}

// acquire takes a worker slot, waiting for one; false when Run stopped
// meanwhile (the slot is then not taken).
func (r *runner) acquire() bool {
	select {
	case r.workers <- struct{}{}:
	case <-r.ctx.Done():
		return false
	}
	if r.stopping() {
		<-r.workers
		return false
	}
	return true
}

// dispatch runs d now, or queues it behind the running delivery of its key.
func (r *runner) dispatch(d *Delivery) {
	key := d.Message.Key
	if r.opts.PerKey && key != "" {
		r.mu.Lock()
		if q, busy := r.keys[key]; busy {
			r.keys[key] = append(q, d)
			r.mu.Unlock()
			return
		}
		r.keys[key] = nil
		r.mu.Unlock()
	}
	if !r.acquire() { // bounded concurrency; blocks the receive loop
		r.release()
		r.next(key) // and what queued behind it meanwhile
		return
	}
	r.wg.Add(1)
	go r.work(key, d)
}

// next returns the delivery waiting first behind key, or nil, forgetting
// the key when none waits. Once Run is stopping it releases every waiting
// delivery of key instead.
func (r *runner) next(key string) *Delivery {
	if !r.opts.PerKey || key == "" {
		return nil
	}
	r.mu.Lock()
	q := r.keys[key]
	if len(q) > 0 && !r.stopping() {
		d := q[0]
		r.keys[key] = q[1:]
		r.mu.Unlock()
		return d
	}
	delete(r.keys, key)
	r.mu.Unlock()
	for range q {
		r.release()
	}
	return nil
}

func (r *runner) work(key string, d *Delivery) {
	defer r.wg.Done()
	defer func() { <-r.workers }()
	for d != nil {
		r.handle(d)
		<-r.outstanding
		d = r.next(key)
	}
}

func (r *runner) handle(d *Delivery) {
	stop := r.renewLocks([]*Delivery{d})
	ctx, span := r.sub.tel.startProcess(r.hctx, d)
	err := r.call(ctx, d)
	stop()
	r.settleAfter(d, err)
	endSpan(span, err)
}

// settleAfter settles d, if its handler left it unsettled, by what the
// handler returned.
func (r *runner) settleAfter(d *Delivery, err error) {
	if d.Settled() {
		return
	}
	// Settle even if Run's context is done: the handler's work is finished.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.sub.settleTimeout)
	defer cancel()
	// A handler that tried to ack and failed (package idem after its
	// commit: ErrAckAfterCommit) wanted the delivery acknowledged, whatever
	// it returned: retry the ack, never nack a committed effect.
	wantAck := d.ackWanted()
	deadLetter := err != nil && !wantAck && IsPermanent(err) && r.sub.caps.DeadLetter
	settle := func() error {
		switch {
		case err == nil || wantAck:
			return r.acks.ack(sctx, d)
		case deadLetter:
			return d.DeadLetter(sctx, err.Error())
		default:
			return d.Retry(r.hctx, d.Attempt)
		}
	}
	if err != nil {
		r.sub.logger.Debug("wary: handler failed", slog.String("message_id", d.Message.ID), slog.Int("attempt", d.Attempt), slog.String("error", err.Error()))
	}
	if err != nil && !wantAck && !deadLetter && r.stopping() {
		// Run is stopping: a retry (a nack) would send d behind the
		// deliveries of its key left unsettled behind it (a delayed retry
		// comes back after them, a RabbitMQ quorum queue requeues at its
		// tail). Left unsettled, as they are, it comes back with them, in
		// its place, once the subscription closes or its lock expires.
		r.sub.logger.Debug("wary: handler failed while Run is stopping; delivery left unsettled", slog.String("message_id", d.Message.ID))
		return
	}
	// A transient settle failure (a connection being re-established) is
	// retried a few times; after that the broker's own redelivery (lock
	// expiry, channel close) takes over.
	var serr error
	for try := 1; try <= settleAttempts; try++ {
		serr = settle()
		if serr == nil || !errors.Is(serr, ErrRetryable) || try == settleAttempts {
			break
		}
		t := time.NewTimer(Backoff{Initial: 50 * time.Millisecond, Max: time.Second}.Delay(try))
		select {
		case <-sctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	if serr != nil && !errors.Is(serr, ErrClosed) {
		r.sub.logger.Warn("wary: settle failed", slog.String("message_id", d.Message.ID), slog.String("error", serr.Error()))
	}
}

// settleAttempts bounds the handler loop's tries at one settlement.
const settleAttempts = 4

func (r *runner) call(ctx context.Context, d *Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panic: %v\n%s", p, debug.Stack())
		}
	}()
	return r.h(ctx, d)
}
