package rabbit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// SubscriptionOptions configures OpenSubscription. Nil means defaults.
type SubscriptionOptions struct {
	// Partitions > 1 consumes the partition queues queue+".0" to
	// queue+"."+(Partitions-1) (see Topology). Default 0: the one queue.
	Partitions int
	// Assigned, with Partitions > 1, is the share of the partitions this
	// subscription consumes: it registers a consumer on those partition
	// queues only. Nil: every partition. Each queue keeps its single
	// active consumer, so two subscriptions with the same share are an
	// active one and a hot standby, and subscriptions with disjoint
	// shares receive in parallel; the shares of a deployment must cover
	// every partition (see Share and the package doc). A partition out of
	// range, a repeated one, an empty share or a share without Partitions
	// fails OpenSubscription with broker.ErrInvalid.
	Assigned []int
	// Concurrency is how many deliveries the consumer handles at once (as
	// broker.RunOptions.Concurrency). It sets the default Prefetch.
	// Default 1.
	Concurrency int
	// Prefetch is the most unsettled deliveries RabbitMQ hands this
	// subscription per queue (basic.qos, per consumer): the bound on what
	// the client buffers. Default 2×Concurrency.
	Prefetch int
	// DeliveryLimit is the queue's delivery limit in deliveries (its
	// x-delivery-limit + 1), declared in Capabilities and applied by the
	// driver to messages that came back through a delay queue, which the
	// broker's count does not see. 0: no limit.
	DeliveryLimit int
	// DeadLetterExchange, if set, enables Delivery.DeadLetter: the message
	// is published there with the reason in the wary-dead-letter-reason
	// header, then acked. It should be the queue's x-dead-letter-exchange.
	DeadLetterExchange string
	// NackDelay enables Nack with a delay, through delay queues the
	// subscription declares next to each queue (see the package doc).
	NackDelay bool
	// MaxMessageSize is declared in Capabilities, as TopicOptions'.
	// Default: DefaultMaxMessageSize.
	MaxMessageSize int
	// Topology, if not nil, is declared when the subscription opens, and
	// Partitions, DeliveryLimit, DeadLetterExchange, NackDelay (on) and
	// MaxMessageSize are taken from it, as Topology.SubscriptionOptions
	// gives them. Its Queue must be the queue opened.
	Topology *Topology
	// Broker configures the portable layer (logger).
	Broker *broker.SubscriptionOptions
}

// OpenSubscription opens a consumer on queue (on each partition queue,
// with Partitions > 1, or on those of SubscriptionOptions.Assigned). Several subscriptions on one queue compete; on a
// queue with a single active consumer only one receives at a time, and the
// next takes over when it goes away. Consuming starts at once, so a
// missing queue fails here with ErrNotFound.
func OpenSubscription(c *Conn, queue string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	s, err := openSubscription(context.Background(), c, queue, opts)
	if err != nil {
		return nil, err
	}
	var bo *broker.SubscriptionOptions
	if opts != nil {
		bo = opts.Broker
	}
	return broker.NewSubscription(s, bo), nil
}

type subscription struct {
	conn      *Conn
	queues    []string
	o         SubscriptionOptions
	caps      driver.Capabilities
	keyFromRK bool
	pub       *publisher
	ownConn   bool

	mu     sync.Mutex
	cons   *consumer
	closed bool

	declMu   sync.Mutex
	declared map[string]time.Time // delay queues, when last declared
}

func openSubscription(ctx context.Context, c *Conn, queue string, opts *SubscriptionOptions) (*subscription, error) {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	if t := o.Topology; t != nil {
		if t.Queue != queue {
			return nil, broker.Invalidf("rabbit: SubscriptionOptions.Topology.Queue is %q, but the queue opened is %q", t.Queue, queue)
		}
		if err := Declare(ctx, c, *t); err != nil {
			return nil, openErr(err)
		}
		ts := t.SubscriptionOptions()
		o.Partitions, o.DeliveryLimit, o.DeadLetterExchange, o.MaxMessageSize = ts.Partitions, ts.DeliveryLimit, ts.DeadLetterExchange, ts.MaxMessageSize
		o.NackDelay = ts.NackDelay
	}
	if o.Concurrency < 1 {
		o.Concurrency = 1
	}
	if o.Prefetch < 1 {
		o.Prefetch = 2 * o.Concurrency
	}
	if o.Partitions < 0 || o.DeliveryLimit < 0 {
		return nil, broker.Invalidf("rabbit: negative Partitions or DeliveryLimit")
	}
	if queue == "" {
		return nil, broker.Invalidf("rabbit: empty queue name")
	}
	if err := checkAssigned(o.Partitions, o.Assigned); err != nil {
		return nil, err
	}
	queues := Topology{Queue: queue, Partitions: o.Partitions}.PartitionQueues()
	if o.Assigned != nil {
		o.Assigned = slices.Clone(o.Assigned)
		queues = make([]string, len(o.Assigned))
		for i, p := range o.Assigned {
			queues[i] = queue + "." + strconv.Itoa(p)
		}
	}
	s := &subscription{
		conn:      c,
		queues:    queues,
		o:         o,
		keyFromRK: o.Partitions <= 1,
		pub:       &publisher{conn: c},
		declared:  map[string]time.Time{},
	}
	s.caps = capsConfig{
		partitions:     o.Partitions,
		maxMessageSize: o.MaxMessageSize,
		deliveryLimit:  o.DeliveryLimit,
		deadLetter:     o.DeadLetterExchange != "",
		nackDelay:      o.NackDelay,
	}.capabilities()
	if _, err := s.consumer(ctx); err != nil {
		return nil, openErr(err)
	}
	return s, nil
}

// checkAssigned validates a share of partitions (nil: all).
func checkAssigned(partitions int, assigned []int) error {
	if assigned == nil {
		return nil
	}
	if partitions <= 1 {
		return broker.Invalidf("rabbit: SubscriptionOptions.Assigned needs Partitions > 1 (Partitions is %d)", partitions)
	}
	if len(assigned) == 0 {
		return broker.Invalidf("rabbit: SubscriptionOptions.Assigned is empty (nil means every partition)")
	}
	seen := make(map[int]bool, len(assigned))
	for _, p := range assigned {
		if p < 0 || p >= partitions {
			return broker.Invalidf("rabbit: assigned partition %d is out of range [0, %d)", p, partitions)
		}
		if seen[p] {
			return broker.Invalidf("rabbit: partition %d is assigned twice", p)
		}
		seen[p] = true
	}
	return nil
}

// Share returns the partitions instance i (0 ≤ i < instances) of a
// deployment of instances subscriptions consumes when the partitions are
// dealt round robin: those p with p mod instances == i. Use it as
// SubscriptionOptions.Assigned. The shares of i = 0..instances-1 are
// disjoint and cover every partition; with more instances than
// partitions, the extra ones get an empty share (which OpenSubscription
// rejects). It returns an empty share for invalid arguments.
func Share(partitions, instances, i int) []int {
	share := []int{}
	if instances < 1 || i < 0 || i >= instances {
		return share
	}
	for p := i; p < partitions; p += instances {
		share = append(share, p)
	}
	return share
}

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

	mu   sync.Mutex
	tags map[uint64]struct{} // unsettled delivery tags
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
	}
	if err := ch.Qos(s.o.Prefetch, 0, false); err != nil {
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
			return nil, s.lost(c)
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
				return nil, s.lost(c)
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
				_ = s.lost(c)
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
	m, prior := fromDelivery(d, s.keyFromRK)
	c.mu.Lock()
	if c.tags != nil {
		c.tags[d.DeliveryTag] = struct{}{}
	}
	c.mu.Unlock()
	a := &ackID{c: c, tag: d.DeliveryTag, queue: c.queues[d.ConsumerTag], key: m.Key, attempt: m.Attempt, prior: prior, d: *d}
	m.AckID = a
	m.AsFunc = a.as
	return m
}

// as is Message.As on received messages: **amqp.Delivery.
func (a *ackID) as(i any) bool {
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
	return true
}

func (c *consumer) has(tag uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.tags[tag]
	return ok
}

// settle claims a and runs f on its channel, mapping a closed channel to
// errLockLost (RabbitMQ requeues what a closed channel held).
func settle(a *ackID, f func(ch *amqp.Channel) error) error {
	if !a.c.take(a.tag) {
		return errLockLost
	}
	if err := f(a.c.ch); err != nil {
		if errors.Is(err, amqp.ErrClosed) || a.c.ch.IsClosed() {
			return fmt.Errorf("%w: %w", errLockLost, err)
		}
		return err
	}
	return nil
}

func (s *subscription) SendAcks(ctx context.Context, ids []driver.AckID) error {
	var first error
	for _, id := range ids {
		a := id.(*ackID)
		err := settle(a, func(ch *amqp.Channel) error { return ch.Ack(a.tag, false) })
		if first == nil {
			first = err
		}
	}
	return first
}

func (s *subscription) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	var first error
	for _, id := range ids {
		err := s.nack(ctx, id.(*ackID), delay)
		if first == nil {
			first = err
		}
	}
	return first
}

func (s *subscription) nack(ctx context.Context, a *ackID, delay time.Duration) error {
	limit := s.o.DeliveryLimit
	if limit > 0 && a.attempt >= limit && (delay > 0 || a.prior > 0) {
		// The broker's count cannot see this delivery's earlier lives (or
		// the delay queue would reset it): apply the limit here.
		if s.o.DeadLetterExchange == "" {
			return settle(a, func(ch *amqp.Channel) error { return ch.Reject(a.tag, false) })
		}
		return s.deadLetter(ctx, a, "delivery_limit")
	}
	if delay <= 0 || !s.o.NackDelay {
		// One message at a time: RabbitMQ counts single rejects toward the
		// delivery limit.
		return settle(a, func(ch *amqp.Channel) error { return ch.Reject(a.tag, true) })
	}
	if !a.c.has(a.tag) {
		return errLockLost
	}
	q, err := s.delayQueue(ctx, a.queue, delay)
	if err != nil {
		return err
	}
	p := republish(&a.d, a.key, amqp.Table{hdrPrior: int32(a.attempt)})
	if err := s.pub.publish(ctx, []outgoing{{exchange: "", key: q, pub: p}}); err != nil {
		var re *returnedError
		if errors.As(err, &re) {
			s.forgetDelayQueue(q)
		}
		return err
	}
	return settle(a, func(ch *amqp.Channel) error { return ch.Ack(a.tag, false) })
}

// delayQueue declares (at most hourly) the delay queue for queue and
// delay, and returns its name.
func (s *subscription) delayQueue(ctx context.Context, queue string, delay time.Duration) (string, error) {
	ttl := delayBucket(delay)
	name := delayQueueName(queue, ttl)
	s.declMu.Lock()
	defer s.declMu.Unlock()
	if t, ok := s.declared[name]; ok && time.Since(t) < time.Hour {
		return name, nil
	}
	err := s.conn.withChannel(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(name, true, false, false, false, delayQueueArgs(queue, ttl))
		return err
	})
	if err != nil {
		return "", err
	}
	s.declared[name] = time.Now()
	return name, nil
}

func (s *subscription) forgetDelayQueue(name string) {
	s.declMu.Lock()
	defer s.declMu.Unlock()
	delete(s.declared, name)
}

func (s *subscription) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	var first error
	for _, id := range ids {
		err := s.deadLetter(ctx, id.(*ackID), reason)
		if first == nil {
			first = err
		}
	}
	return first
}

// deadLetter publishes a copy with the reason to the dead-letter exchange,
// then acks the original. AMQP 0-9-1's reject carries no reason, hence the
// copy; a failure between the two leaves a duplicate in the dead-letter
// queue, never a loss.
func (s *subscription) deadLetter(ctx context.Context, a *ackID, reason string) error {
	if s.o.DeadLetterExchange == "" {
		return &invalidError{"no dead-letter exchange configured"}
	}
	if !a.c.has(a.tag) {
		return errLockLost
	}
	p := republish(&a.d, a.key, amqp.Table{hdrReason: reason, hdrPrior: int32(a.attempt)})
	if err := s.pub.publish(ctx, []outgoing{{exchange: s.o.DeadLetterExchange, key: a.d.RoutingKey, pub: p}}); err != nil {
		return err
	}
	return settle(a, func(ch *amqp.Channel) error { return ch.Ack(a.tag, false) })
}

func (s *subscription) ExtendLocks(context.Context, []driver.AckID, time.Duration) error {
	return &invalidError{"RabbitMQ has no lock to extend"}
}

func (s *subscription) Capabilities() driver.Capabilities   { return s.caps }
func (s *subscription) Classify(err error) driver.ErrorInfo { return classify(err) }
func (s *subscription) ErrorAs(err error, i any) bool       { return errorAs(err, i) }

// As accepts **rabbit.Conn, **amqp.Connection (current, nil while
// reconnecting) and **amqp.Channel (the consumer's current channel, nil if
// none).
func (s *subscription) As(i any) bool {
	switch p := i.(type) {
	case **Conn:
		*p = s.conn
		return true
	case **amqp.Connection:
		*p = s.conn.Connection()
		return true
	case **amqp.Channel:
		s.mu.Lock()
		defer s.mu.Unlock()
		*p = nil
		if s.cons != nil {
			*p = s.cons.ch
		}
		return true
	}
	return false
}

// Close closes the consumer's channel: RabbitMQ requeues the unsettled
// deliveries at once.
func (s *subscription) Close() error {
	s.mu.Lock()
	s.closed = true
	c := s.cons
	s.cons = nil
	s.mu.Unlock()
	var err error
	if c != nil {
		err = c.shutdown()
	}
	if perr := s.pub.close(); err == nil {
		err = perr
	}
	if s.ownConn {
		if cerr := s.conn.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
