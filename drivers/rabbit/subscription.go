package rabbit

import (
	"context"
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
