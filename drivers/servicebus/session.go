package servicebus

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/wary-go/wary/broker/driver"
)

// sessionPool holds up to MaxSessions sessions of an entity that requires
// sessions. Each slot accepts the next available session, receives its
// messages one at a time (the SDK can release messages of a batch receive
// and redeliver them behind later ones, so batches would break the
// session's order), hands each out and waits for it to be settled before
// receiving the next (head-of-line), renews the session lock while it
// holds the session, and releases the session after SessionIdle without a
// message.
type sessionPool struct {
	s    *subscription
	out  chan *driver.Message
	errs chan error
	wg   sync.WaitGroup

	mu      sync.Mutex
	held    map[*heldSession]struct{}
	waiters int           // receive calls waiting for a message
	wake    chan struct{} // closed when a receive call starts waiting
}

func newSessionPool(s *subscription) *sessionPool {
	p := &sessionPool{s: s, out: make(chan *driver.Message), errs: make(chan error, 1), held: map[*heldSession]struct{}{}, wake: make(chan struct{})}
	for i := 0; i < s.o.MaxSessions; i++ {
		p.wg.Add(1)
		go p.slot()
	}
	return p
}

// heldSession is one accepted session.
type heldSession struct {
	r       *azservicebus.SessionReceiver
	ctx     context.Context // ends when the session is released or lost
	cancel  context.CancelFunc
	done    chan struct{} // the delivery handed out was settled
	current *delivery     // the delivery handed out, until settled
	// sdk serialises the calls on r: the SDK's receiver is not safe for
	// concurrent use when a call recovers its links (the recovery and
	// RenewSessionLock both write the receiver's lockedUntil; seen by the
	// race detector after a connection reset).
	sdk sync.Mutex
	// lostCtx ends when the session lock is known to be lost: settles
	// in progress stop, later ones report ErrLockLost at once.
	lostCtx    context.Context
	markLostFn context.CancelFunc

	// lock is the session lock's end as this client estimates it, from
	// the accept's return or the start of the last successful renewal.
	lock lockEstimate
}

func (h *heldSession) lost() bool { return h.lostCtx.Err() != nil }

func (h *heldSession) markLost() {
	h.markLostFn()
	h.cancel()
}

func (h *heldSession) settled(*delivery) {
	select {
	case h.done <- struct{}{}:
	default:
	}
}

func (p *sessionPool) accept(ctx context.Context) (*azservicebus.SessionReceiver, error) {
	path := p.s.path
	// the SDK passes the context's deadline to the service as the accept
	// timeout: keep it short so Close is prompt
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if path.queue != "" {
		return p.s.client.AcceptNextSessionForQueue(actx, path.queue, nil)
	}
	return p.s.client.AcceptNextSessionForSubscription(actx, path.topic, path.sub, nil)
}

func (p *sessionPool) report(err error) {
	select {
	case p.errs <- err:
	default:
	}
}

func (p *sessionPool) slot() {
	defer p.wg.Done()
	ctx := p.s.ctx
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		// accept a session only while someone receives: a consumer that
		// does not receive must not hold sessions others could serve
		if !p.awaitDemand(ctx) {
			return
		}
		r, err := p.accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var sbe *azservicebus.Error
			if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &sbe) && sbe.Code == azservicebus.CodeTimeout) {
				backoff = 100 * time.Millisecond
				continue // no session available
			}
			if code(err) != driver.Unavailable {
				p.report(err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		p.hold(ctx, r, time.Now())
	}
}

func (p *sessionPool) awaitDemand(ctx context.Context) bool {
	for {
		p.mu.Lock()
		n, wake := p.waiters, p.wake
		p.mu.Unlock()
		if n > 0 {
			return true
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		}
	}
}

// hold serves one session until it goes idle, is lost, or the pool closes.
// accepted is when the accept returned: an accept waits until a session
// is free, so the lock's start is known only to lie before then (within a
// network latency); the estimate errs, by that latency, on the side of
// keeping a session.
func (p *sessionPool) hold(parent context.Context, r *azservicebus.SessionReceiver, accepted time.Time) {
	h := &heldSession{r: r, done: make(chan struct{}, 1)}
	h.ctx, h.cancel = context.WithCancel(parent)
	h.lostCtx, h.markLostFn = context.WithCancel(context.Background())
	h.lock.renewed(accepted, p.s.props.LockDuration)
	p.mu.Lock()
	p.held[h] = struct{}{}
	p.mu.Unlock()
	defer func() {
		h.cancel()
		cctx, cancel := context.WithTimeout(context.Background(), p.s.o.SettleTimeout)
		// a delivery handed out and not settled is abandoned, so that its
		// delivery counts as a crashed consumer's would (closing the
		// receiver alone releases it uncounted)
		h.sdk.Lock()
		if d := h.current; d != nil && !h.lost() && d.finish() {
			_ = r.AbandonMessage(cctx, d.rm, nil)
		}
		_ = r.Close(cctx) // releases the session
		h.sdk.Unlock()
		cancel()
		p.mu.Lock()
		delete(p.held, h)
		p.mu.Unlock()
	}()
	go p.renew(h)
	for h.ctx.Err() == nil {
		msgs, err := p.receiveOne(h)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			if h.ctx.Err() == nil && (code(err) == driver.LockLost || takenElsewhere(err)) {
				h.markLost()
			}
			return
		}
		if len(msgs) == 0 {
			return // idle: release the session
		}
		m := p.s.wrap(msgs[0], r, h)
		idle := time.NewTimer(p.s.o.SessionIdle)
		select {
		case p.out <- m:
			idle.Stop()
		case <-idle.C:
			return // nobody takes it: release the session, uncounted
		case <-h.ctx.Done():
			idle.Stop()
			return // closing or lost: the message returns with the session
		}
		h.current = m.AckID.(*delivery)
		select {
		case <-h.done:
			h.current = nil
		case <-h.ctx.Done():
			return
		}
	}
}

// receiveOne waits up to SessionIdle for the session's next message, in
// slices short enough that renew, waiting for h.sdk, keeps the lock.
func (p *sessionPool) receiveOne(h *heldSession) ([]*azservicebus.ReceivedMessage, error) {
	slice := min(p.s.o.SessionIdle, max(p.s.props.LockDuration/6, 100*time.Millisecond))
	deadline := time.Now().Add(p.s.o.SessionIdle)
	for {
		wait := min(slice, time.Until(deadline))
		if wait <= 0 || h.ctx.Err() != nil {
			return nil, nil
		}
		rctx, cancel := context.WithTimeout(h.ctx, wait)
		h.sdk.Lock()
		msgs, err := h.r.ReceiveMessages(rctx, 1, nil)
		h.sdk.Unlock()
		cancel()
		if len(msgs) > 0 || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
			return msgs, err
		}
	}
}

// renew keeps the session lock while the session is held. A renewal that fails
// after the lock has ended (by the estimate in h.lock) marks the session
// lost: after a connection loss the SDK retries a lost session lock as
// recoverable (it re-attaches the session's link, which fails while another
// receiver holds the session), so every call just runs out of time, and a
// holder that waited for a definite answer would keep the session's slot, and
// the message it handed out, forever.
func (p *sessionPool) renew(h *heldSession) {
	every := p.s.props.LockDuration / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(h.ctx, min(p.s.o.SettleTimeout, every))
		h.sdk.Lock()
		start := time.Now()
		err := h.r.RenewSessionLock(rctx, nil)
		h.sdk.Unlock()
		cancel()
		if err == nil {
			h.lock.renewed(start, p.s.props.LockDuration)
			continue
		}
		if h.ctx.Err() != nil {
			return
		}
		if (code(err) != driver.Unavailable && code(err) != driver.DeadlineExceeded) || takenElsewhere(err) || h.lock.expired(time.Now()) {
			h.markLost()
			return
		}
	}
}

// receive waits up to ReceiveWait for a first message, then takes what is
// ready, up to max.
func (p *sessionPool) receive(ctx context.Context, max int) ([]*driver.Message, error) {
	t := time.NewTimer(p.s.o.ReceiveWait)
	defer t.Stop()
	p.mu.Lock()
	p.waiters++
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.waiters--
		p.mu.Unlock()
	}()
	var out []*driver.Message
	select {
	case m := <-p.out:
		out = append(out, m)
	case err := <-p.errs:
		return nil, err
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(out) < max {
		select {
		case m := <-p.out:
			out = append(out, m)
		default:
			return out, nil
		}
	}
	return out, nil
}

func (p *sessionPool) close(ctx context.Context) {
	// s.ctx is cancelled: every slot returns and closes its receiver
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
