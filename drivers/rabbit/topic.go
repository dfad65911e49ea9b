package rabbit

import (
	"context"
	"hash/fnv"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// DefaultMaxMessageSize is RabbitMQ's default max_message_size (128 MiB).
const DefaultMaxMessageSize = 128 << 20

// TopicOptions configures OpenTopic. Nil means defaults.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, logger).
	broker.TopicOptions
	// Partitions > 1 publishes each message with the routing key
	// "<partition>", the partition being FNV-1a(Message.Key) mod
	// Partitions (messages without a key: FNV-1a of their ID), for an
	// exchange that binds one queue per partition (see Topology). The key
	// travels in the wary-key header. Default 0: the routing key is
	// Message.Key.
	Partitions int
	// RoutingKey, if set, is the routing key of every message (with one
	// queue); Message.Key then travels in the wary-key header. Ignored
	// with Partitions > 1.
	RoutingKey string
	// MaxMessageSize is the size limit the topic declares and enforces
	// (body, ID, key and headers). Default: DefaultMaxMessageSize, the
	// server's default; set it to the server's max_message_size if that
	// was changed.
	MaxMessageSize int
	// Topology, if not nil, is declared when the topic opens (see
	// Declare), and Partitions and MaxMessageSize are taken from it.
	Topology *Topology
	// SkipCheck skips checking, at open, that the exchange exists.
	SkipCheck bool
}

// OpenTopic opens a topic that publishes to exchange. Every publish waits
// for RabbitMQ's publisher confirm, and is mandatory: a message no queue
// takes is an error (ErrNotFound, certainly not sent).
//
// Unless SkipCheck, OpenTopic checks that the exchange exists (ErrNotFound
// if not). The empty name is RabbitMQ's default exchange, which routes to
// the queue named by the routing key. ctx bounds the open (the Topology's
// declaration and the check), not the topic's life.
func OpenTopic(ctx context.Context, c *Conn, exchange string, opts *TopicOptions) (*broker.Topic, error) {
	var o TopicOptions
	if opts != nil {
		o = *opts
	}
	t, err := openTopic(ctx, c, exchange, o)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, &o.TopicOptions), nil
}

type topic struct {
	conn       *Conn
	exchange   string
	partitions int
	routingKey string
	caps       capability.Topic
	pub        *publisher
	ownConn    bool // the URL opener's topic closes its Conn
}

func openTopic(ctx context.Context, c *Conn, exchange string, o TopicOptions) (*topic, error) {
	if o.Topology != nil {
		if err := Declare(ctx, c, *o.Topology); err != nil {
			return nil, openErr(err)
		}
		tt := o.Topology.TopicOptions()
		o.Partitions, o.MaxMessageSize = tt.Partitions, tt.MaxMessageSize
	}
	if o.Partitions < 0 {
		return nil, driver.Invalidf("rabbit: negative Partitions")
	}
	if !o.SkipCheck && exchange != "" {
		err := c.withChannel(ctx, func(ch *amqp.Channel) error {
			return ch.ExchangeDeclarePassive(exchange, amqp.ExchangeDirect, true, false, false, false, nil)
		})
		if err != nil {
			return nil, openErr(err)
		}
	}
	t := &topic{
		conn:       c,
		exchange:   exchange,
		partitions: o.Partitions,
		routingKey: o.RoutingKey,
		pub:        &publisher{conn: c},
	}
	t.caps = topicCaps(o.Partitions, o.MaxMessageSize, c.FrameMax())
	return t, nil
}

// route returns the routing key for m and whether the key goes in a header.
func (t *topic) route(m *driver.Message) (string, bool) {
	if t.partitions > 1 {
		return strconv.Itoa(partition(m, t.partitions)), true
	}
	if t.routingKey != "" {
		return t.routingKey, true
	}
	return m.Key, false
}

// partition picks m's partition: FNV-1a of the key (of the ID if no key).
func partition(m *driver.Message, n int) int {
	h := fnv.New32a()
	if m.Key != "" {
		_, _ = h.Write([]byte(m.Key))
	} else {
		_, _ = h.Write([]byte(m.ID))
	}
	return int(h.Sum32() % uint32(n))
}

func (t *topic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	out := make([]outgoing, len(msgs))
	for i, m := range msgs {
		key, inHeader := t.route(m)
		if err := checkMessage(m, key); err != nil {
			return refuse(len(msgs), i, notSent(err))
		}
		out[i] = outgoing{exchange: t.exchange, key: key, pub: toPublishing(m, inHeader)}
	}
	return t.pub.publish(ctx, out)
}

func (t *topic) Capabilities() capability.Topic      { return t.caps }
func (t *topic) Classify(err error) driver.ErrorInfo { return classify(err) }
func (t *topic) ErrorAs(err error, i any) bool       { return errorAs(err, i) }

// As accepts **rabbit.Conn and **amqp.Connection (the current connection,
// nil while reconnecting).
func (t *topic) As(i any) bool {
	switch p := i.(type) {
	case **Conn:
		*p = t.conn
		return true
	case **amqp.Connection:
		*p = t.conn.Connection()
		return true
	}
	return false
}

func (t *topic) Close() error {
	err := t.pub.close()
	if t.ownConn {
		if cerr := t.conn.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
