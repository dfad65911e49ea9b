package rabbit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/wary-go/wary/broker/driver"
)

// publisher publishes with confirms on one channel at a time, opening a
// new channel (on the Conn's current connection) when the last one closed.
// Topics use one; subscriptions use one for delayed nacks and dead-letters.
type publisher struct {
	conn *Conn

	mu     sync.Mutex
	cur    *confirmChannel
	closed bool
	wg     sync.WaitGroup
}

// outgoing is one message to publish.
type outgoing struct {
	exchange, key string
	pub           amqp.Publishing
}

// get returns a live confirm channel, opening one if needed.
func (p *publisher) get(ctx context.Context) (*confirmChannel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	if p.cur != nil && !p.cur.dead() {
		return p.cur, nil
	}
	ch, frameMax, cork, err := p.conn.channelCork(ctx)
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	cc := &confirmChannel{
		ch:       ch,
		frameMax: frameMax,
		cork:     cork,
		pending:  map[uint64]*pendingPub{},
		done:     make(chan struct{}),
	}
	// Returns are unbuffered: amqp091-go hands a basic.return to us before
	// it reads the basic.ack that follows it, so by the time the loop sees
	// a confirmation it has seen the return for the same message.
	returns := ch.NotifyReturn(make(chan amqp.Return))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 256))
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		cc.loop(returns, confirms, closes)
	}()
	p.cur = cc
	return cc, nil
}

// publish sends msgs and waits for every confirm.
func (p *publisher) publish(ctx context.Context, msgs []outgoing) error {
	cc, err := p.get(ctx)
	if err != nil {
		return notSent(err)
	}
	return cc.publish(ctx, msgs)
}

// close closes the current channel and waits for its loop to end.
func (p *publisher) close() error {
	p.mu.Lock()
	p.closed = true
	cc := p.cur
	p.cur = nil
	p.mu.Unlock()
	var err error
	if cc != nil {
		err = cc.ch.Close()
		if errors.Is(err, amqp.ErrClosed) {
			err = nil
		}
	}
	p.wg.Wait()
	return err
}

// confirmChannel is a channel in confirm mode and the publishes awaiting a
// confirm on it.
type confirmChannel struct {
	ch       *amqp.Channel
	frameMax int       // the connection's frame_max (0: unlimited)
	cork     *corkConn // the connection's, gathering a batch's writes (nil: none)

	pubMu sync.Mutex // serializes sequence number + publish

	mu      sync.Mutex
	pending map[uint64]*pendingPub
	err     error         // why the channel closed
	done    chan struct{} // closed when the loop ended
}

type pendingPub struct {
	id, exchange, key string
	returned          *returnedError
	b                 *batchWait
	i                 int // the message's index in its batch
}

// batchWait collects the outcome of each message of a batch.
type batchWait struct {
	mu        sync.Mutex
	remaining int
	errs      []error // errs[i]: message i's outcome once settled (nil: confirmed)
	settled   []bool
	done      chan struct{}
}

func newBatchWait(n int) *batchWait {
	return &batchWait{remaining: n, errs: make([]error, n), settled: make([]bool, n), done: make(chan struct{})}
}

func (b *batchWait) settle(i int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.settled[i] {
		return
	}
	b.errs[i], b.settled[i] = err, true
	b.remaining--
	if b.remaining == 0 {
		close(b.done)
	}
}

// result is the batch's error: each message's outcome, those not settled
// yet taking unsettled (the batch's own failure).
func (b *batchWait) result(unsettled error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := slices.Clone(b.errs)
	for i, ok := range b.settled {
		if !ok {
			errs[i] = unsettled
		}
	}
	return driver.BatchErrors(errs)
}

func (cc *confirmChannel) dead() bool {
	select {
	case <-cc.done:
		return true
	default:
		return cc.ch.IsClosed()
	}
}

func (cc *confirmChannel) publish(ctx context.Context, msgs []outgoing) error {
	// A content header over frame_max would make RabbitMQ close the whole
	// connection: refuse the batch before sending any of it.
	for i := range msgs {
		if err := checkFrame(&msgs[i].pub, cc.frameMax); err != nil {
			return refuse(len(msgs), i, notSent(err))
		}
	}
	b := newBatchWait(len(msgs))
	if err := cc.send(ctx, b, msgs); err != nil {
		return err
	}
	select {
	case <-b.done:
		return b.result(nil)
	case <-ctx.Done():
		return b.result(maybeSent(ctx.Err()))
	}
}

// send hands msgs to the broker, their writes gathered into as few as the
// connection's corkConn allows. A non-nil error is the batch's result.
func (cc *confirmChannel) send(ctx context.Context, b *batchWait, msgs []outgoing) error {
	cc.pubMu.Lock()
	defer cc.pubMu.Unlock()
	cc.cork.hold()
	defer cc.cork.release()
	for i := range msgs {
		m := &msgs[i]
		cc.mu.Lock()
		if cc.err != nil {
			err := cc.err
			cc.mu.Unlock()
			return failRest(b, i, err)
		}
		seq := cc.ch.GetNextPublishSeqNo()
		cc.pending[seq] = &pendingPub{id: m.pub.MessageId, exchange: m.exchange, key: m.key, b: b, i: i}
		cc.mu.Unlock()
		err := cc.ch.PublishWithContext(ctx, m.exchange, m.key, true, false, m.pub)
		if err != nil {
			cc.mu.Lock()
			delete(cc.pending, seq)
			cc.mu.Unlock()
			if errors.Is(err, amqp.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				// Nothing of this message was written.
				return failRest(b, i, err)
			}
			// A write error: part of the frame may be out.
			b.settle(i, maybeSent(err))
			return failRest(b, i+1, err)
		}
	}
	return nil
}

// failRest reports the failure, with err, of a batch whose first n
// messages were handed to the broker: those not confirmed yet may have
// been sent, the others were not.
func failRest(b *batchWait, n int, err error) error {
	for i := n; i < len(b.errs); i++ {
		b.settle(i, notSent(err))
	}
	return b.result(maybeSent(err))
}

// refuse is the error of a batch of n messages of which message i broke a
// rule before anything was sent.
func refuse(n, i int, err error) error {
	errs := make([]error, n)
	for j := range errs {
		errs[j] = driver.ErrNotAttempted
	}
	errs[i] = err
	return driver.BatchErrors(errs)
}

// loop matches returns and confirms to pending publishes until the channel
// closes, then fails whatever is still pending.
func (cc *confirmChannel) loop(returns <-chan amqp.Return, confirms <-chan amqp.Confirmation, closes <-chan *amqp.Error) {
	defer close(cc.done)
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			cc.onReturn(r)
		case c, ok := <-confirms:
			if !ok {
				cc.shutdown(closes)
				return
			}
			// Take any return that raced into the other channel first.
			for drained := false; !drained; {
				select {
				case r, ok := <-returns:
					if ok {
						cc.onReturn(r)
					} else {
						returns = nil
						drained = true
					}
				default:
					drained = true
				}
			}
			cc.onConfirm(c)
		}
	}
}

func (cc *confirmChannel) onReturn(r amqp.Return) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	// The oldest unconfirmed, unreturned publish of the same message ID to
	// the same exchange and routing key is the one returned.
	var best uint64
	var bp *pendingPub
	for seq, p := range cc.pending {
		if p.returned == nil && p.id == r.MessageId && p.exchange == r.Exchange && p.key == r.RoutingKey && (bp == nil || seq < best) {
			best, bp = seq, p
		}
	}
	if bp != nil {
		bp.returned = &returnedError{exchange: r.Exchange, key: r.RoutingKey, code: r.ReplyCode, text: r.ReplyText}
	}
}

func (cc *confirmChannel) onConfirm(c amqp.Confirmation) {
	cc.mu.Lock()
	p, ok := cc.pending[c.DeliveryTag]
	delete(cc.pending, c.DeliveryTag)
	cc.mu.Unlock()
	if !ok {
		return
	}
	switch {
	case p.returned != nil:
		// Unroutable: the broker dropped it.
		p.b.settle(p.i, notSent(p.returned))
	case !c.Ack:
		p.b.settle(p.i, maybeSent(nackError{}))
	default:
		p.b.settle(p.i, nil)
	}
}

func (cc *confirmChannel) shutdown(closes <-chan *amqp.Error) {
	var reason error = amqp.ErrClosed
	select {
	case e, ok := <-closes:
		if ok && e != nil {
			reason = e
		}
	default:
	}
	cc.mu.Lock()
	cc.err = fmt.Errorf("rabbit: publish channel closed before the confirm: %w", reason)
	pending := cc.pending
	cc.pending = map[uint64]*pendingPub{}
	cc.mu.Unlock()
	for _, p := range pending {
		p.b.settle(p.i, maybeSent(cc.err))
	}
}
