package rabbit

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// SubscriptionOptions configures OpenSubscription: what the client does.
// What the queues are (partitions, delivery limit, dead-letter exchange)
// is the Topology's. Nil means defaults.
type SubscriptionOptions struct {
	// SubscriptionOptions are the portable options (logger).
	broker.SubscriptionOptions
	// Assigned, with Topology.Partitions > 1, is the share of the
	// partitions this subscription consumes: it registers a consumer on
	// those partition queues only. Nil: every partition. Each queue keeps
	// its single active consumer, so two subscriptions with the same share
	// are an active one and a hot standby, and subscriptions with disjoint
	// shares receive in parallel; the shares of a deployment must cover
	// every partition (see Share and the package doc). A partition out of
	// range, a repeated one, an empty share or a share without Partitions
	// fails OpenSubscription with broker.ErrInvalid.
	Assigned []int
	// Prefetch, if set, is the most unsettled deliveries RabbitMQ hands
	// this subscription per queue (basic.qos, per consumer): the bound on
	// what the client buffers. Default: what Subscription.Run asks for,
	// broker.RunOptions.MaxOutstanding (2×Concurrency), and 2 for a
	// subscription read with Receive alone. Set it only to override Run.
	Prefetch int
	// NackDelay enables Nack with a delay, through delay queues the
	// subscription declares next to each queue (see the package doc).
	NackDelay bool
	// Management is the address of RabbitMQ's management HTTP API, through
	// which the subscription reads what the broker holds for its queues
	// (type, arguments, policies: see Reading the broker in the package
	// doc): http://HOST:PORT[/PATH], with a user and password of its own
	// or those of the Conn's URL. "": http://HOST:15672 (https://HOST:15671
	// for amqps) of the Conn's URL, with its user and password;
	// ManagementOff: none, AMQP only.
	Management string
}

// settings is what a subscription runs with: its topology's facts and its
// options' behaviour.
type settings struct {
	SubscriptionOptions
	Partitions         int
	DeliveryLimit      int
	DeadLetterExchange string
	DeadLettersFrom    string
}

func (t Topology) settings(o SubscriptionOptions) settings {
	return settings{SubscriptionOptions: o, Partitions: t.Partitions, DeliveryLimit: t.DeliveryLimit,
		DeadLetterExchange: t.DeadLetterExchange(), DeadLettersFrom: t.DeadLettersFrom}
}

// OpenSubscription opens a subscription of t's queue (of each partition
// queue, with t.Partitions > 1, or of those of SubscriptionOptions.Assigned).
// It does not declare t (Declare does); it checks that the queues exist
// (ErrNotFound if not); the consumer registers on them when the
// subscription starts receiving (Run, or the first Receive), with the
// prefetch Run asks for. Several subscriptions on one queue compete; on a
// queue with a single active consumer only the first to register
// receives, and the next takes over when it goes away. ctx bounds the open
// (the checks and the reads of the management API), not the
// subscription's life.
func OpenSubscription(ctx context.Context, c *Conn, t Topology, opts *SubscriptionOptions) (*broker.Subscription, error) {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	s, err := openSubscription(ctx, c, t.Queue, t.settings(o))
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &o.SubscriptionOptions), nil
}

// OpenDeadLetters opens a subscription of t's dead-letter queue
// (t.DeadLetterQueue()), as a Topology of its own: no delivery limit (the
// queue Declare makes has none), and DeadLettersFrom t's dead-letter
// exchange, so that its messages report their reason. ErrInvalid when t
// has no dead-letter queue. ctx bounds the open, as for OpenSubscription.
func OpenDeadLetters(ctx context.Context, c *Conn, t Topology, opts *SubscriptionOptions) (*broker.Subscription, error) {
	if t.DeadLetterQueue() == "" {
		return nil, driver.Invalidf("rabbit: the topology of queue %q names no dead-letter queue", t.Queue)
	}
	return OpenSubscription(ctx, c, t.deadLetters(), opts)
}

// defaultPrefetch is the prefetch before Run asks for one.
const defaultPrefetch = 2

type subscription struct {
	// ackFramesSent counts basic.ack frames SendAcks sent (for tests).
	ackFramesSent atomic.Int64

	conn    *Conn
	queues  []string
	o       settings
	limit   int // the queue's delivery limit (0: none), the server's default resolved
	caps    capability.Subscription
	origins map[string]origin // by queue
	pub     *publisher
	ownConn bool
	// reader: a Nack puts the message back as a reader does, not as a
	// failed delivery (see putBack); OpenDeadLettersURL's subscriptions.
	reader bool

	mu       sync.Mutex
	cons     *consumer
	retired  []*consumer // a reader's consumers stopped by putBack, open until Close
	closed   bool
	prefetch int // basic.qos of the next consumer

	declMu   sync.Mutex
	declared map[string]time.Time // delay queues, when last declared
}

func openSubscription(ctx context.Context, c *Conn, queue string, o settings) (*subscription, error) {
	if o.Partitions < 0 || o.Prefetch < 0 {
		return nil, driver.Invalidf("rabbit: negative Partitions or Prefetch")
	}
	if queue == "" {
		return nil, driver.Invalidf("rabbit: empty queue name")
	}
	ver := c.version()
	if o.DeliveryLimit < NoDeliveryLimit {
		// Negative: refused at once. Whether a limit needs a dead-letter
		// exchange is checked once the broker was read: the queue may
		// hold one the options do not name.
		return nil, checkLimit("Topology", o.DeliveryLimit, false, ver)
	}
	if _, err := newMgmtClient(o.Management, c.url); err != nil {
		return nil, err
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
	// The queues must exist; the consumer registers when receiving starts.
	err := c.withChannel(ctx, func(ch *amqp.Channel) error {
		for _, q := range queues {
			if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, openErr(err)
	}
	rd, err := readQueues(ctx, c, queues, o, ver)
	if err != nil {
		return nil, err
	}
	// A limit without a dead-letter exchange drops messages: refused,
	// unless the broker holds a dead-letter exchange the options do not
	// name. The server's default limit is checked only where the broker's
	// limit could not be read.
	dlxHeld := o.DeadLetterExchange != "" || rd.dlxRead && rd.dlx != nil
	limit := effectiveLimit(o.DeliveryLimit, ver)
	if rd.limitRead {
		limit = rd.limit
	}
	if !rd.limitRead || o.DeliveryLimit != 0 {
		if err := checkLimit("Topology", o.DeliveryLimit, dlxHeld, ver); err != nil {
			return nil, err
		}
	}
	deadLetter := o.DeadLetterExchange != ""
	if rd.dlxRead {
		// The broker's dead-letter exchange is the one RabbitMQ uses past
		// the limit: Delivery.DeadLetter publishes there too.
		deadLetter = rd.dlx != nil
		if rd.dlx != nil && *rd.dlx != "" {
			o.DeadLetterExchange = *rd.dlx
		}
	}
	s := &subscription{
		conn:     c,
		queues:   queues,
		o:        o,
		limit:    limit,
		origins:  make(map[string]origin, len(queues)),
		pub:      &publisher{conn: c},
		prefetch: defaultPrefetch,
		declared: map[string]time.Time{},
	}
	for i, q := range queues {
		org := origin{queue: q, deadLettersFrom: o.DeadLettersFrom}
		if o.Partitions > 1 {
			org.partitions, org.partition = o.Partitions, i
			if o.Assigned != nil {
				org.partition = o.Assigned[i]
			}
		}
		s.origins[q] = org
	}
	if o.Prefetch > 0 {
		s.prefetch = o.Prefetch
	}
	s.caps = subCaps{
		partitions:    o.Partitions,
		deliveryLimit: s.limit,
		deadLetter:    deadLetter,
		nackDelay:     o.NackDelay,
		noOrder:       rd.noOrder,
		orderUnread:   rd.orderUnread,
		noCount:       rd.classic,
		lockNote:      rd.lockNote,
	}.capabilities()
	// What reading the queues left unread first, then the lock, which no
	// reading shows.
	lock := s.caps.Source.Unread
	s.caps.Source = rd.src
	s.caps.Source.Unread = append(s.caps.Source.Unread, lock...)
	return s, nil
}

// SetPrefetch implements driver.Prefetcher: Subscription.Run calls it with
// its MaxOutstanding before it receives, and the consumer registers with
// that basic.qos (on every channel it opens, after a reconnect too). An
// explicit SubscriptionOptions.Prefetch wins. RabbitMQ applies a prefetch
// to consumers registered after it, so a change once the consumer is
// registered (a second Run with another Concurrency) takes effect on the
// next channel.
func (s *subscription) SetPrefetch(n int) error {
	if s.o.Prefetch > 0 || n < 1 {
		return nil
	}
	s.mu.Lock()
	s.prefetch = n
	s.mu.Unlock()
	return nil
}

// checkAssigned validates a share of partitions (nil: all).
func checkAssigned(partitions int, assigned []int) error {
	if assigned == nil {
		return nil
	}
	if partitions <= 1 {
		return driver.Invalidf("rabbit: SubscriptionOptions.Assigned needs Partitions > 1 (Partitions is %d)", partitions)
	}
	if len(assigned) == 0 {
		return driver.Invalidf("rabbit: SubscriptionOptions.Assigned is empty (nil means every partition)")
	}
	seen := make(map[int]bool, len(assigned))
	for _, p := range assigned {
		if p < 0 || p >= partitions {
			return driver.Invalidf("rabbit: assigned partition %d is out of range [0, %d)", p, partitions)
		}
		if seen[p] {
			return driver.Invalidf("rabbit: partition %d is assigned twice", p)
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

func (s *subscription) Capabilities() capability.Subscription { return s.caps }
func (s *subscription) Classify(err error) driver.ErrorInfo   { return classify(err) }
func (s *subscription) ErrorAs(err error, i any) bool         { return errorAs(err, i) }

// As accepts **rabbit.Conn, **amqp.Connection (current, nil while
// reconnecting) and **amqp.Channel (the consumer's current channel, nil if
// none).
func (s *subscription) As(i any) bool {
	switch p := i.(type) {
	case **subscription: // for the package's tests only
		*p = s
		return true
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
// deliveries at once. A reader's (OpenDeadLettersURL's) consumer is
// cancelled and its unsettled deliveries put back with basic.nack first,
// as putBack does.
func (s *subscription) Close() error {
	s.mu.Lock()
	s.closed = true
	cs := s.retired
	if s.cons != nil {
		cs = append(cs, s.cons)
	}
	s.cons, s.retired = nil, nil
	s.mu.Unlock()
	var err error
	for _, c := range cs {
		if s.reader {
			// Whatever the reader still holds, shown or only pushed
			// ahead, goes back with basic.nack, not at the close.
			_ = c.cancelAll()
			_ = c.ch.Nack(0, true, true)
		}
		if cerr := c.shutdown(); err == nil {
			err = cerr
		}
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
