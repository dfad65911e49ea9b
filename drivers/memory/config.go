package memory

import (
	"fmt"
	"strings"
	"time"

	"github.com/wary-go/wary/broker/capability"
)

// Profile selects which broker the memory driver imitates.
type Profile string

// Profiles. See the package doc for what each one promises.
const (
	// Queue is a plain work queue: no order, per-message ack, lock
	// timeout, delivery limit and dead-letter queue (a Service Bus queue
	// without sessions; with NoNackDelay, a topic subscription without
	// sessions).
	Queue Profile = "queue"
	// Partitioned imitates Kafka: keyed partitions, cumulative acks,
	// partitions assigned to the open consumers.
	Partitioned Profile = "partitioned"
	// SQSFIFO imitates an SQS FIFO queue: order and head-of-line per
	// message group, dedup on the message ID.
	SQSFIFO Profile = "sqsfifo"
	// ServiceBus imitates a Service Bus queue or topic subscription with
	// sessions: order and head-of-line per session, duplicate detection on
	// the message ID, a lock that does not expire while its consumer lives
	// (the session lock is renewed while held) and no delayed Nack.
	ServiceBus Profile = "servicebus"
)

// ParseProfile parses a profile name (case-insensitive); the empty string
// is Queue.
func ParseProfile(s string) (Profile, error) {
	switch p := Profile(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return Queue, nil
	case Queue, Partitioned, SQSFIFO, ServiceBus:
		return p, nil
	}
	return "", errorf(codeInvalid, "unknown profile %q (want queue, partitioned, sqsfifo or servicebus)", s)
}

// Defaults.
const (
	DefaultLockTimeout   = 30 * time.Second
	DefaultDeliveryLimit = 10
	DefaultPartitions    = 4
	// MaxPartitions bounds TopicConfig.Partitions (each partition has
	// state of its own, allocated when the topic is created).
	MaxPartitions           = 1024
	DefaultMessageRetention = 7 * 24 * time.Hour
)

// TopicConfig configures a topic and, through it, every subscription of the
// topic. The zero value is a Queue topic with the defaults.
type TopicConfig struct {
	// Profile is the broker imitated (default Queue).
	Profile Profile
	// LockTimeout is how long a delivery stays locked before it returns to
	// the queue (default 30s; Partitioned and ServiceBus: default 0,
	// meaning no expiry: deliveries are held until settled or the consumer
	// closes). A negative value means no expiry for every profile.
	LockTimeout time.Duration
	// DeliveryLimit is the number of deliveries after which a message that
	// returns to the queue goes to the dead-letter queue instead
	// (0: default 10; -1: no limit).
	DeliveryLimit int
	// DedupWindow is how long a message ID is remembered to drop
	// duplicate publishes (0: SQSFIFO 5m, ServiceBus 10m, others none;
	// negative: none).
	DedupWindow time.Duration
	// DedupScope is where a message ID must be unique for DedupWindow to
	// drop a publish: capability.DedupQueue, the default, across the whole
	// topic; capability.DedupMessageGroup per Message.Key (as an SQS FIFO queue
	// with DeduplicationScope messageGroup). Ignored without a window.
	DedupScope capability.DedupScope
	// Partitions is the number of partitions (Partitioned only, default 4,
	// at most MaxPartitions).
	Partitions int
	// MaxMessageSize in bytes, counted as broker.Message counts it (0:
	// default 1 MiB for Queue and Partitioned, 256 KiB for SQSFIFO and
	// ServiceBus; negative: no limit).
	MaxMessageSize int
	// NoNackDelay makes the subscriptions refuse a Nack with a delay
	// (capability.Subscription.NackDelay false), as a Service Bus topic
	// subscription or a RabbitMQ queue without nack_delay do. ServiceBus
	// never delays a Nack, whatever this says.
	NoNackDelay bool
	// MessageRetention is how long a message is kept after publish before it is
	// dropped undelivered (default 7 days). It is the capabilities'
	// RedeliveryHorizon.
	MessageRetention time.Duration
}

// normalize returns c with every default filled in, and checks it.
func (c TopicConfig) normalize() (TopicConfig, error) {
	p, err := ParseProfile(string(c.Profile))
	if err != nil {
		return c, err
	}
	c.Profile = p
	switch {
	case c.LockTimeout < 0:
		c.LockTimeout = 0
	case c.LockTimeout == 0 && p != Partitioned && p != ServiceBus:
		c.LockTimeout = DefaultLockTimeout
	}
	switch {
	case c.DeliveryLimit == 0:
		c.DeliveryLimit = DefaultDeliveryLimit
	case c.DeliveryLimit < 0:
		c.DeliveryLimit = 0
	}
	switch {
	case c.DedupWindow < 0:
		c.DedupWindow = 0
	case c.DedupWindow == 0 && p == SQSFIFO:
		c.DedupWindow = 5 * time.Minute
	case c.DedupWindow == 0 && p == ServiceBus:
		c.DedupWindow = 10 * time.Minute
	}
	switch {
	case c.DedupWindow == 0:
		c.DedupScope = capability.DedupNone
	case c.DedupScope == capability.DedupNone:
		c.DedupScope = capability.DedupQueue
	case c.DedupScope != capability.DedupQueue && c.DedupScope != capability.DedupMessageGroup:
		return c, errorf(codeInvalid, "unknown dedup scope %d", int(c.DedupScope))
	}
	if p == Partitioned {
		if c.Partitions == 0 {
			c.Partitions = DefaultPartitions
		}
		if c.Partitions < 0 || c.Partitions > MaxPartitions {
			return c, errorf(codeInvalid, "partitions must be from 1 to %d, not %d", MaxPartitions, c.Partitions)
		}
	} else {
		c.Partitions = 1
	}
	switch {
	case c.MaxMessageSize < 0:
		c.MaxMessageSize = 0
	case c.MaxMessageSize == 0 && (p == SQSFIFO || p == ServiceBus):
		c.MaxMessageSize = 256 << 10
	case c.MaxMessageSize == 0:
		c.MaxMessageSize = 1 << 20
	}
	if c.MessageRetention <= 0 {
		c.MessageRetention = DefaultMessageRetention
	}
	if p == ServiceBus {
		c.NoNackDelay = true
	}
	return c, nil
}

// external is the normalized configuration n as callers write it: a
// setting that is none is -1 rather than zero (which reads as "default").
func (n TopicConfig) external() TopicConfig {
	if n.LockTimeout == 0 {
		n.LockTimeout = -1
	}
	if n.DeliveryLimit == 0 {
		n.DeliveryLimit = -1
	}
	if n.DedupWindow == 0 {
		n.DedupWindow = -1
	}
	if n.MaxMessageSize == 0 {
		n.MaxMessageSize = -1
	}
	return n
}

// TopicCapabilities returns what topics with this configuration promise a
// publisher. An invalid configuration (unknown profile) yields the zero
// value.
func (c TopicConfig) TopicCapabilities() capability.Topic {
	n, err := c.normalize()
	if err != nil {
		return capability.Topic{}
	}
	return n.topicCaps()
}

// SubscriptionCapabilities returns what subscriptions of topics with this
// configuration promise a consumer. An invalid configuration (unknown
// profile) yields the zero value.
func (c TopicConfig) SubscriptionCapabilities() capability.Subscription {
	n, err := c.normalize()
	if err != nil {
		return capability.Subscription{}
	}
	return n.subCaps()
}

// topicCaps and subCaps are the capabilities of a normalized
// configuration, in which zero means none (normalizing it again would read
// that zero as "default").
func (n TopicConfig) topicCaps() capability.Topic {
	caps := capability.Topic{
		MaxMessageSize: n.MaxMessageSize,
		DedupWindow:    n.DedupWindow,
		DedupScope:     n.DedupScope,
	}
	switch n.Profile {
	case Partitioned:
		caps.OrderingKey = "record key"
	case SQSFIFO:
		caps.OrderingKey = "MessageGroupId"
		caps.KeyRequired = true
		caps.MaxBatchSize = 10
	case ServiceBus:
		caps.OrderingKey = "SessionId"
		caps.KeyRequired = true
	}
	return caps
}

func (n TopicConfig) subCaps() capability.Subscription {
	caps := capability.Subscription{
		AckModel:          capability.AckPerMessage,
		DeliveryCount:     true,
		DeliveryLimit:     n.DeliveryLimit,
		DeadLetter:        true,
		LockTimeout:       n.LockTimeout,
		LockExtendable:    n.LockTimeout > 0,
		NackDelay:         !n.NoNackDelay,
		RedeliveryHorizon: n.MessageRetention,
	}
	if n.DeliveryLimit > 0 {
		caps.DeliveryLimitMode = capability.LimitNative
	}
	switch n.Profile {
	case Partitioned:
		caps.Ordering = capability.OrderPartition
		caps.AckModel = capability.AckCumulative
		caps.LockExtendable = false
		// As on Kafka, the count is the consumer's: it restarts when a
		// partition moves to another consumer, so it is not a true count.
		caps.DeliveryCount = false
		if n.DeliveryLimit > 0 {
			caps.DeliveryLimitMode = capability.LimitEmulated
		}
	case SQSFIFO:
		caps.Ordering = capability.OrderMessageGroup
		caps.HeadOfLine = true
	case ServiceBus:
		caps.Ordering = capability.OrderSession
		caps.HeadOfLine = true
	}
	return caps
}

// deadLetterCaps are the capabilities of a subscription's dead-letter
// queue: a plain queue without a delivery limit or a queue of its own.
func deadLetterCaps(n TopicConfig) capability.Subscription {
	return capability.Subscription{
		Ordering:          capability.OrderNone,
		AckModel:          capability.AckPerMessage,
		DeliveryCount:     true,
		LockTimeout:       n.LockTimeout,
		LockExtendable:    n.LockTimeout > 0,
		NackDelay:         !n.NoNackDelay,
		RedeliveryHorizon: n.MessageRetention,
	}
}

func (c TopicConfig) String() string {
	return fmt.Sprintf("profile=%s lock=%s limit=%d dedup=%s partitions=%d maxsize=%d retention=%s nackdelay=%t",
		c.Profile, c.LockTimeout, c.DeliveryLimit, c.DedupWindow, c.Partitions, c.MaxMessageSize, c.MessageRetention, !c.NoNackDelay)
}
