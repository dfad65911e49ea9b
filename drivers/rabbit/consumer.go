package rabbit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// consumer is one channel consuming every queue of the subscription. When
// the channel closes it is replaced, and delivery tags of the old one are
// stale (settling them is ErrLockLost).
type consumer struct {
	ch     *amqp.Channel
	out    <-chan amqp.Delivery // closed when the channel closed
	stop   chan struct{}
	halt   sync.Once         // closes stop
	queues map[string]string // consumer tag -> queue
	closes chan *amqp.Error

	// cancel sends basic.cancel for the consumer tags once (cancelAll); retired
	// (under the subscription's mu) marks a consumer stopped on purpose,
	// whose end of deliveries is not a loss.
	cancel    sync.Once
	cancelErr error
	drain     sync.Once
	retired   bool

	mu   sync.Mutex
	tags map[uint64]struct{} // unsettled delivery tags
	// sending holds the tags taken for settling whose frame is not sent
	// yet: a multiple ack must not cover them (see SendAcks).
	sending map[uint64]struct{}
	// registered counts the tags put in tags, maxTag is the highest: all
	// tags up to maxTag have been registered when the two are equal
	// (RabbitMQ numbers a channel's deliveries 1, 2, 3, ...).
	registered, maxTag uint64
}

// consumer returns the live consumer, opening one if there is none.
func (s *subscription) consumer(ctx context.Context) (*consumer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if s.cons != nil {
		return s.cons, nil
	}
	ch, err := s.conn.channel(ctx)
	if err != nil {
		return nil, err
	}
	c := &consumer{
		ch:     ch,
		stop:   make(chan struct{}),
		queues: map[string]string{},
		closes: ch.NotifyClose(make(chan *amqp.Error, 1)),
		tags:   map[uint64]struct{}{},

		sending: map[uint64]struct{}{},
	}
	if err := ch.Qos(s.prefetch, 0, false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	srcs := make([]<-chan amqp.Delivery, len(s.queues))
	for i, q := range s.queues {
		tag := fmt.Sprintf("wary-%s-%d", broker.NewID()[:12], i)
		if s.o.Assigned != nil {
			tag = fmt.Sprintf("wary-%s-%d", broker.NewID()[:12], s.o.Assigned[i])
		}
		src, err := ch.Consume(q, tag, false, false, false, false, nil)
		if err != nil {
			_ = ch.Close()
			return nil, err
		}
		c.queues[tag] = q
		srcs[i] = src
	}
	if len(srcs) == 1 {
		c.out = srcs[0]
	} else {
		c.out = fanIn(c, srcs)
	}
	s.cons = c
	return c, nil
}

// fanIn merges the partition consumers into one channel, keeping each
// queue's order. When one of them ends, it closes the channel, so that the
// consumer is replaced as a whole.
func fanIn(c *consumer, srcs []<-chan amqp.Delivery) <-chan amqp.Delivery {
	out := make(chan amqp.Delivery)
	var wg sync.WaitGroup
	for _, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range src {
				select {
				case out <- d:
				case <-c.stop:
					return
				}
			}
			_ = c.ch.Close()
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return out
}

// shutdown stops c's forwarders, makes its tags stale and closes its
// channel (RabbitMQ requeues what it held).
func (c *consumer) shutdown() error {
	c.halt.Do(func() { close(c.stop) })
	c.mu.Lock()
	c.tags = nil
	c.mu.Unlock()
	err := c.ch.Close()
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}

// cancelAll cancels c's consumers (basic.cancel, waiting for cancel-ok): the
// broker hands c nothing more, and what c holds stays held, to be
// settled on c's channel, which stays open.
func (c *consumer) cancelAll() error {
	c.cancel.Do(func() {
		for tag := range c.queues {
			if err := c.ch.Cancel(tag, false); err != nil {
				c.cancelErr = err
				return
			}
		}
	})
	return c.cancelErr
}

// retire stops c, a reader's consumer, and makes the next receive open
// another. What the broker pushed to c ahead that no receive took goes
// back at once (basic.nack), for the next consumer to deliver; what c
// delivered stays held on its channel, open until the last of it is put
// back (closeIdle) or the subscription closes.
func (s *subscription) retire(c *consumer) error {
	s.mu.Lock()
	if s.cons == c {
		s.cons = nil
	}
	if !c.retired && !s.closed {
		c.retired = true
		s.retired = append(s.retired, c)
	}
	s.mu.Unlock()
	if err := c.cancelAll(); err != nil {
		return err
	}
	// After cancel-ok amqp091-go hands out what it buffered, then closes
	// the deliveries (a reader consumes one queue: c.out is its own).
	c.drain.Do(func() {
		for d := range c.out {
			_ = c.ch.Nack(d.DeliveryTag, false, true)
		}
	})
	return nil
}

// closeIdle closes c, a retired consumer, once it holds nothing: a reader
// that receives again after each put-back must not pile up channels.
func (s *subscription) closeIdle(c *consumer) {
	c.mu.Lock()
	idle := len(c.tags) == 0 && len(c.sending) == 0
	c.mu.Unlock()
	s.mu.Lock()
	i := slices.Index(s.retired, c)
	if !idle || i < 0 {
		s.mu.Unlock()
		return
	}
	s.retired = slices.Delete(s.retired, i, i+1)
	s.mu.Unlock()
	_ = c.shutdown()
}

// ended is ReceiveBatch's answer when c's deliveries end: nothing, for a
// consumer retired on purpose, else why it was lost.
func (s *subscription) ended(c *consumer) error {
	s.mu.Lock()
	retired := c.retired
	s.mu.Unlock()
	if retired {
		return nil
	}
	return s.lost(c)
}

// lost drops c if it is still current and says why it ended.
func (s *subscription) lost(c *consumer) error {
	s.mu.Lock()
	if s.cons == c {
		s.cons = nil
	}
	s.mu.Unlock()
	c.shutdown()
	var reason error = errConsumerLost
	select {
	case e, ok := <-c.closes:
		if ok && e != nil {
			reason = fmt.Errorf("%w: %w", errConsumerLost, e)
			if code(e) == driver.NotFound {
				// The queue is gone: say so, rather than "retry".
				reason = fmt.Errorf("rabbit: consumer closed: %w", e)
			}
		}
	default:
	}
	return reason
}

// receiveWait is how long ReceiveBatch waits for a first message.
const receiveWait = 500 * time.Millisecond

// timerPool saves ReceiveBatch a timer allocation per wait. Since Go 1.23
// a stopped timer's channel holds no stale value, so Reset is safe.
var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

func (s *subscription) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := s.consumer(ctx)
	if err != nil {
		return nil, err
	}
	var msgs []*driver.Message
	select {
	case d, ok := <-c.out:
		// Something is buffered: no timer needed.
		if !ok {
			return nil, s.ended(c)
		}
		msgs = append(msgs, s.decode(c, &d))
	default:
		timer := timerPool.Get().(*time.Timer)
		timer.Reset(receiveWait)
		defer func() {
			timer.Stop()
			timerPool.Put(timer)
		}()
		select {
		case d, ok := <-c.out:
			if !ok {
				return nil, s.ended(c)
			}
			msgs = append(msgs, s.decode(c, &d))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, nil
		}
	}
	for len(msgs) < maxMessages {
		select {
		case d, ok := <-c.out:
			if !ok {
				_ = s.ended(c)
				return msgs, nil
			}
			msgs = append(msgs, s.decode(c, &d))
		default:
			return msgs, nil
		}
	}
	return msgs, nil
}

// ackID is a delivery's AckID: the consumer (channel) it came on and what
// a delayed nack or a dead-letter needs to republish it.
type ackID struct {
	c       *consumer
	tag     uint64
	queue   string
	key     string
	attempt int
	prior   int
	d       amqp.Delivery
}

func (s *subscription) decode(c *consumer, d *amqp.Delivery) *driver.Message {
	m, prior := fromDelivery(d, s.origins[c.queues[d.ConsumerTag]])
	c.mu.Lock()
	if c.tags != nil {
		c.tags[d.DeliveryTag] = struct{}{}
		c.registered++
		c.maxTag = max(c.maxTag, d.DeliveryTag)
	}
	c.mu.Unlock()
	a := &ackID{c: c, tag: d.DeliveryTag, queue: c.queues[d.ConsumerTag], key: m.Key, attempt: m.Attempt, prior: prior, d: *d}
	m.AckID = a
	m.As = a
	return m
}

// As is Message.As on received messages: **amqp.Delivery.
func (a *ackID) As(i any) bool {
	p, ok := i.(**amqp.Delivery)
	if ok {
		*p = &a.d
	}
	return ok
}

// take claims the delivery for settling: false if it was settled already
// or its channel is gone.
func (c *consumer) take(tag uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.tags[tag]; !ok {
		return false
	}
	delete(c.tags, tag)
	c.sending[tag] = struct{}{}
	return true
}

// sent ends the settling of tags that take (or takeAll) claimed.
func (c *consumer) sent(tags ...uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tags {
		delete(c.sending, t)
	}
}

func (c *consumer) has(tag uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.tags[tag]
	return ok
}
