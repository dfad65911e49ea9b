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

// TopicOptions configures OpenTopic: what the client does. What the
// exchange is (its partitions, the size limit) is the Topology's. Nil
// means defaults.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, logger).
	broker.TopicOptions
	// RoutingKey, if set, is the routing key of every message (with one
	// queue); Message.Key then travels in the wary-key header. Ignored
	// with Topology.Partitions > 1. Default "": the routing key is
	// Message.Key.
	RoutingKey string
	// SkipCheck skips checking, at open, that the exchange exists.
	SkipCheck bool
}

// OpenTopic opens a topic that publishes to t's exchange (t.Exchange,
// with t.Partitions and t.MaxMessageSize; the queues are the
// subscriptions'). Every publish waits for RabbitMQ's publisher confirm,
// and is mandatory: a message no queue takes is an error (ErrNotFound,
// certainly not sent). OpenTopic does not declare t: Declare does.
//
// Unless SkipCheck, OpenTopic checks that the exchange exists (ErrNotFound
// if not). The empty name is RabbitMQ's default exchange, which routes to
// the queue named by the routing key. ctx bounds the open (the check), not
// the topic's life.
func OpenTopic(ctx context.Context, c *Conn, t Topology, opts *TopicOptions) (*broker.Topic, error) {
	var o TopicOptions
	if opts != nil {
		o = *opts
	}
	tp, err := openTopic(ctx, c, t, o)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(tp, &o.TopicOptions), nil
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

func openTopic(ctx context.Context, c *Conn, tt Topology, o TopicOptions) (*topic, error) {
	exchange := tt.Exchange
	if tt.Partitions < 0 {
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
		partitions: tt.Partitions,
		routingKey: o.RoutingKey,
		pub:        &publisher{conn: c},
	}
	t.caps = topicCaps(tt.Partitions, tt.MaxMessageSize, c.FrameMax())
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
