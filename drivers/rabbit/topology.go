package rabbit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Topology is the one description of what a topic and its subscriptions
// use on the server: the exchange and queues, their arguments, the
// partitions and the size limit. Declare declares it, OpenTopic publishes
// to its exchange, OpenSubscription consumes its queues, OpenDeadLetters
// reads its dead-letter queue, and PlanTopologyURL plans it from a URL;
// the options structs hold only what the client does.
//
// Queues are quorum queues (durable, replicated, with a delivery count)
// with a single active consumer; see the package doc for what each mode
// promises. The dead-letter queue is a quorum queue too, so that dead
// letters are replicated as the messages they were, but without a
// delivery limit (none before RabbitMQ 4.0, x-delivery-limit -1 from 4.0)
// and without a dead-letter exchange: it is read and put back (wary dlq
// list), never processed, and no number of reads can drop what it holds.
//
// Names: the partition queues of a partitioned topology are Queue+".0" to
// Queue+"."+(Partitions-1); the dead-letter exchange is Queue+".dlx" and
// its queue Queue+".dlq" (unless DeadLetterExchangeName and
// DeadLetterQueueName name others); delay queues (made on first use by a
// nack with a delay) are named after the queue they feed,
// Queue+".delay.<ms>ms".
//
// A topic uses Exchange, Partitions and MaxMessageSize (Exchange "" is
// RabbitMQ's default exchange, which routes to the queue named by the
// routing key); a subscription uses Queue, Partitions, DeliveryLimit, the
// dead-letter exchange and DeadLettersFrom.
type Topology struct {
	// Exchange receives the topic's messages. It is declared as a fanout
	// exchange for a single queue and a direct exchange for partitions.
	Exchange string
	// Queue is the subscription's queue (the base name for partitions).
	Queue string
	// Partitions > 1 spreads messages over that many queues by a hash of
	// their key, each with its own single active consumer: order per key
	// across consumers. A topic publishes each message with the routing
	// key "<partition>", the partition being FNV-1a(Message.Key) mod
	// Partitions (messages without a key: FNV-1a of their ID), and the key
	// travels in the wary-key header. 0 or 1: one queue, order per queue.
	Partitions int
	// DeliveryLimit is the number of deliveries after which RabbitMQ
	// dead-letters a message instead of delivering it again (the queue's
	// x-delivery-limit is DeliveryLimit-1, RabbitMQ counting returns); a
	// subscription declares it in Capabilities and applies it to messages
	// that came back through a delay queue, which the broker's count does
	// not see. It needs a dead-letter exchange: RabbitMQ drops a message
	// past the limit of a queue without one. 0: the server's default, no
	// limit before RabbitMQ 4.0 and 21 deliveries from 4.0
	// (x-delivery-limit 20, so that Declare and OpenSubscription refuse a
	// topology without a dead-letter exchange there); NoDeliveryLimit:
	// none (x-delivery-limit -1 from 4.0).
	DeliveryLimit int
	// DeadLetter declares the dead-letter exchange and queue and points the
	// queues at them; a subscription's Delivery.DeadLetter publishes there
	// (with the reason in the wary-dead-letter-reason header), then acks.
	DeadLetter bool
	// DeadLetterExchangeName, if set, is the queues' dead-letter exchange
	// instead of Queue+".dlx" (and implies DeadLetter), for a queue whose
	// x-dead-letter-exchange is not Declare's.
	DeadLetterExchangeName string
	// DeadLetterQueueName, if set, is the dead-letter queue (bound to the
	// dead-letter exchange) instead of Queue+".dlq", when the queues have
	// a dead-letter exchange. With a DeadLetterExchangeName of its own and
	// no DeadLetterQueueName, the dead-letter queue is not known: Declare
	// declares none, and OpenDeadLetters fails.
	DeadLetterQueueName string
	// DeadLettersFrom says that Queue is a dead-letter queue, fed through
	// this exchange (another topology's dead-letter exchange;
	// OpenDeadLetters sets it). Only messages that arrived through it
	// carry a dead-letter reason (wary-dead-letter-reason: wary's, or
	// RabbitMQ's x-death) and keep counting attempts from their earlier
	// lives (see Trusted headers in the package doc). "": the queue is not
	// a dead-letter queue, and no message read from it reports a reason.
	DeadLettersFrom string
	// MaxMessageSize is the size limit topics and subscriptions declare,
	// and topics enforce (body, ID, key and headers): the server's
	// max_message_size, if it was changed. 0: DefaultMaxMessageSize, the
	// server's default.
	MaxMessageSize int
}

// PartitionQueues returns the names of the queues the topology consumes.
func (t Topology) PartitionQueues() []string {
	if t.Partitions <= 1 {
		return []string{t.Queue}
	}
	qs := make([]string, t.Partitions)
	for i := range qs {
		qs[i] = t.Queue + "." + strconv.Itoa(i)
	}
	return qs
}

// deadLetter reports whether the queues have a dead-letter exchange.
func (t Topology) deadLetter() bool {
	return t.DeadLetter || t.DeadLetterExchangeName != ""
}

// DeadLetterExchange returns the dead-letter exchange's name ("" without
// one).
func (t Topology) DeadLetterExchange() string {
	switch {
	case t.DeadLetterExchangeName != "":
		return t.DeadLetterExchangeName
	case t.deadLetter():
		return t.Queue + ".dlx"
	}
	return ""
}

// DeadLetterQueue returns the dead-letter queue's name ("" without one,
// or when DeadLetterExchangeName names an exchange of its own and
// DeadLetterQueueName no queue). Read it with OpenDeadLetters.
func (t Topology) DeadLetterQueue() string {
	switch {
	case !t.deadLetter():
		return ""
	case t.DeadLetterQueueName != "":
		return t.DeadLetterQueueName
	case t.DeadLetterExchange() == t.Queue+".dlx":
		return t.Queue + ".dlq"
	}
	return ""
}

// deadLetters returns the topology of t's dead-letter queue, as
// OpenDeadLetters reads it: no delivery limit, and DeadLettersFrom the
// dead-letter exchange, so that its messages report their reason.
func (t Topology) deadLetters() Topology {
	return Topology{Queue: t.DeadLetterQueue(), DeliveryLimit: NoDeliveryLimit, DeadLettersFrom: t.DeadLetterExchange(), MaxMessageSize: t.MaxMessageSize}
}

func (t Topology) check() error {
	switch {
	case t.Exchange == "" || t.Queue == "":
		return &invalidError{"topology needs an exchange and a queue name"}
	case t.Partitions < 0:
		return &invalidError{"topology partitions must not be negative"}
	}
	return nil
}

// limitArg is the queue's x-delivery-limit on server v, if it has one.
func (t Topology) limitArg(v serverVersion) (int, bool) {
	switch {
	case t.DeliveryLimit > 0:
		return t.DeliveryLimit - 1, true
	case t.DeliveryLimit == NoDeliveryLimit && v.atLeast4():
		return -1, true // lifts RabbitMQ 4's default
	}
	return 0, false
}

// Declare declares t: the exchange, the queue or partition queues bound to
// it, and the dead-letter exchange and queue. Declaring what already exists
// with the same arguments is a no-op; with different arguments it fails
// (RabbitMQ's PRECONDITION_FAILED, ErrInvalid). A delivery limit without
// DeadLetter fails with ErrInvalid, the server's default included (from
// RabbitMQ 4.0; see Topology.DeliveryLimit).
func Declare(ctx context.Context, c *Conn, t Topology) error {
	if err := t.check(); err != nil {
		return err
	}
	ver := c.version()
	if err := checkLimit("Topology", t.DeliveryLimit, t.deadLetter(), ver); err != nil {
		return err
	}
	d := t.declaration(ver)
	return c.withChannel(ctx, func(ch *amqp.Channel) error { return d.declare(ch, nil) })
}

// declaration is what Declare, and a topology URL's plan, declare: an
// exchange, queues bound to it, a dead-letter exchange and queue, each
// optional ("", none).
type declaration struct {
	exchange, exchangeKind string
	queues                 []string   // bound with routing keys "0", "1"... when partitioned
	partitioned            bool       // the queues are partitions
	queueArgs              amqp.Table // of every queue
	dlx, dlq               string
	dlqArgs                amqp.Table
}

// declaration returns what Declare declares for t on server v.
func (t Topology) declaration(v serverVersion) declaration {
	d := declaration{exchange: t.Exchange, exchangeKind: amqp.ExchangeFanout, queues: t.PartitionQueues(), partitioned: t.Partitions > 1}
	if d.partitioned {
		d.exchangeKind = amqp.ExchangeDirect
	}
	d.queueArgs = amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum, amqp.SingleActiveConsumerArg: true}
	if lim, ok := t.limitArg(v); ok {
		d.queueArgs["x-delivery-limit"] = lim
	}
	if t.deadLetter() {
		d.dlx, d.dlq = t.DeadLetterExchange(), t.DeadLetterQueue()
		d.queueArgs["x-dead-letter-exchange"] = d.dlx
		d.dlqArgs = amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}
		if lim, ok := (Topology{DeliveryLimit: NoDeliveryLimit}).limitArg(v); ok {
			d.dlqArgs["x-delivery-limit"] = lim
		}
	}
	return d
}

// declare declares d on ch, but not the exchanges and queues for which
// exists (nil: none) reports true: those it leaves as they are, and binds
// a queue only when it or its exchange is declared now.
func (d declaration) declare(ch *amqp.Channel, exists func(queue bool, name string) bool) error {
	skip := func(queue bool, name string) bool { return exists != nil && exists(queue, name) }
	bind := func(q, key, ex string) error {
		if skip(true, q) && skip(false, ex) {
			return nil
		}
		return ch.QueueBind(q, key, ex, false, nil)
	}
	if d.dlx != "" && !skip(false, d.dlx) {
		if err := ch.ExchangeDeclare(d.dlx, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return err
		}
	}
	if d.dlq != "" {
		if !skip(true, d.dlq) {
			if _, err := ch.QueueDeclare(d.dlq, true, false, false, false, d.dlqArgs); err != nil {
				return err
			}
		}
		if err := bind(d.dlq, "", d.dlx); err != nil {
			return err
		}
	}
	if d.exchange != "" && !skip(false, d.exchange) {
		if err := ch.ExchangeDeclare(d.exchange, d.exchangeKind, true, false, false, false, nil); err != nil {
			return err
		}
	}
	for i, q := range d.queues {
		if !skip(true, q) {
			if _, err := ch.QueueDeclare(q, true, false, false, false, d.queueArgs); err != nil {
				return err
			}
		}
		if d.exchange == "" {
			continue
		}
		key := ""
		if d.partitioned {
			key = strconv.Itoa(i)
		}
		if err := bind(q, key, d.exchange); err != nil {
			return err
		}
	}
	return nil
}

// Delete deletes what Declare declared, and the delay queues subscriptions
// made, messages included. Missing pieces are skipped.
func (t Topology) Delete(ctx context.Context, c *Conn) error {
	if err := t.check(); err != nil {
		return err
	}
	return c.withChannel(ctx, func(ch *amqp.Channel) error {
		var errs []error
		for _, q := range t.PartitionQueues() {
			for _, d := range delayBuckets {
				if _, err := ch.QueueDelete(delayQueueName(q, d), false, false, false); err != nil {
					return err
				}
			}
			if _, err := ch.QueueDelete(q, false, false, false); err != nil {
				errs = append(errs, err)
			}
		}
		if dlq := t.DeadLetterQueue(); dlq != "" {
			if _, err := ch.QueueDelete(dlq, false, false, false); err != nil {
				errs = append(errs, err)
			}
		}
		if t.deadLetter() {
			if err := ch.ExchangeDelete(t.DeadLetterExchange(), false, false); err != nil {
				errs = append(errs, err)
			}
		}
		if err := ch.ExchangeDelete(t.Exchange, false, false); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}

// delayBuckets are the delays a nack's delay is rounded up to. RabbitMQ
// expires messages only at the head of a queue, so each delay has its own
// queue (a 30s message must not hold back a 100ms one).
var delayBuckets = []time.Duration{
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour,
	3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// MaxNackDelay is the longest nack delay; longer delays are cut to it.
const MaxNackDelay = 24 * time.Hour

// delayBucket rounds d up to a bucket.
func delayBucket(d time.Duration) time.Duration {
	for _, b := range delayBuckets {
		if d <= b {
			return b
		}
	}
	return delayBuckets[len(delayBuckets)-1]
}

func delayQueueName(queue string, d time.Duration) string {
	return fmt.Sprintf("%s.delay.%dms", queue, d.Milliseconds())
}

func isDelayQueue(name string) bool {
	i := strings.LastIndex(name, ".delay.")
	if i < 0 || !strings.HasSuffix(name, "ms") {
		return false
	}
	_, err := strconv.Atoi(name[i+len(".delay.") : len(name)-2])
	return err == nil
}

// delayQueueArgs: messages wait ttl, then RabbitMQ dead-letters them
// through the default exchange straight back to queue. The queue deletes
// itself after a day without use (subscriptions redeclare it hourly).
func delayQueueArgs(queue string, ttl time.Duration) amqp.Table {
	return amqp.Table{
		"x-message-ttl":             ttl.Milliseconds(),
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": queue,
		"x-expires":                 (ttl + 24*time.Hour).Milliseconds(),
	}
}
