// Package capability describes, as data, what a broker promises: a
// publisher on a topic (Topic) and a consumer of a subscription
// (Subscription), with where each value came from (Source). Both
// *broker.Topic and *broker.Subscription return them (Capabilities), and
// drivers (package broker/driver) declare them; the conformance suite
// proves every declared field against the live broker.
package capability

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Redelivery horizons that are not a length of time.
const (
	// HorizonUnknown: the driver could not learn how long copies of a
	// message can keep arriving (a configuration it did not read). It is
	// the zero value, so a driver that says nothing says "unknown", never
	// "no redelivery". An inbox on such a subscription needs an explicit
	// retention.
	HorizonUnknown time.Duration = 0
	// HorizonUnbounded: copies can arrive at any time after the first
	// delivery (a Kafka topic that keeps records forever, a RabbitMQ
	// quorum queue that keeps an unacked message until it is settled). An
	// inbox on such a subscription keeps its records forever unless the
	// user knowingly accepts a finite retention.
	HorizonUnbounded time.Duration = math.MaxInt64
)

// LockNone, as a LockTimeout, says that the broker does not lock a
// delivery at all: an unsettled message is visible to consumers again at
// once (an SQS queue with VisibilityTimeout 0), so a handler still running
// sees it received a second time. It is not LockTimeout 0, which says the
// opposite: held until settled or the consumer goes away. broker.Subscription.Run
// refuses a subscription that declares it.
const LockNone time.Duration = -1

// OrderingScope says inside which scope the broker delivers messages in the
// order they were published.
type OrderingScope int

// Ordering scopes.
const (
	// OrderNone: no order is promised.
	OrderNone OrderingScope = iota
	// OrderQueue: the whole queue is one scope (a RabbitMQ queue with a
	// single active consumer).
	OrderQueue
	// OrderPartition: per partition, the partition chosen by the key (Kafka).
	OrderPartition
	// OrderMessageGroup: per message group (SQS FIFO MessageGroupId).
	OrderMessageGroup
	// OrderSession: per session (Service Bus SessionId).
	OrderSession
)

func (s OrderingScope) String() string {
	switch s {
	case OrderNone:
		return "none"
	case OrderQueue:
		return "queue"
	case OrderPartition:
		return "partition"
	case OrderMessageGroup:
		return "message group"
	case OrderSession:
		return "session"
	}
	return fmt.Sprintf("OrderingScope(%d)", int(s))
}

// DedupScope says over which set of messages the broker suppresses
// duplicate IDs.
type DedupScope int

// Dedup scopes.
const (
	DedupNone DedupScope = iota
	// DedupQueue: an ID is unique across the whole queue or entity.
	DedupQueue
	// DedupMessageGroup: an ID is unique inside its message group only.
	DedupMessageGroup
)

func (s DedupScope) String() string {
	switch s {
	case DedupNone:
		return "none"
	case DedupQueue:
		return "queue"
	case DedupMessageGroup:
		return "message group"
	}
	return fmt.Sprintf("DedupScope(%d)", int(s))
}

// AckModel says what an acknowledgement covers.
type AckModel int

// Ack models.
const (
	// AckPerMessage: each ack settles exactly its own delivery.
	AckPerMessage AckModel = iota
	// AckCumulative: the broker records one position per scope (a Kafka
	// offset); an ack takes effect only once every earlier delivery of the
	// same scope is acked, and a crash redelivers everything after the
	// contiguous acked prefix, acked or not.
	AckCumulative
)

func (m AckModel) String() string {
	if m == AckCumulative {
		return "cumulative"
	}
	return "per message"
}

// LimitMode says who enforces the delivery limit.
type LimitMode int

// Delivery limit modes.
const (
	LimitNone LimitMode = iota
	// LimitNative: the broker counts deliveries and dead-letters (SQS
	// redrive, Service Bus MaxDeliveryCount, RabbitMQ quorum delivery-limit).
	LimitNative
	// LimitEmulated: the library counts and dead-letters (Kafka).
	LimitEmulated
)

func (m LimitMode) String() string {
	switch m {
	case LimitNative:
		return "native"
	case LimitEmulated:
		return "emulated"
	}
	return "none"
}

// Topic is what a broker promises to a publisher, as data:
// the publish half of its promise. What a consumer is promised is the
// subscription's half, Subscription, declared by the side that
// owns it. The conformance suite checks every field against the live
// broker.
type Topic struct {
	// OrderingKey names the broker field that broker.Message.Key maps to (for the
	// docs and error messages), e.g. "MessageGroupId".
	OrderingKey string
	// KeyRequired: publishing a message without a Key is an error
	// (broker.ErrInvalid), detected before anything is sent.
	KeyRequired bool

	// DedupWindow is how long after a publish the broker silently drops
	// another publish with the same broker.Message.ID (0: no broker dedup).
	DedupWindow time.Duration
	// DedupScope is where an ID must be unique for the window to apply.
	DedupScope DedupScope

	// MaxMessageSize is the largest message, in bytes, counting body, ID,
	// key and header names and values (0: no limit known).
	MaxMessageSize int
	// MaxHeaderSize is the most bytes a message's headers may take,
	// counting names and values (0: no separate limit). Some brokers hold
	// headers in a frame of their own (AMQP 0-9-1's content header, bounded
	// by the connection's frame_max): a larger header block fails the whole
	// connection, not one message. The portable layer rejects a message over
	// it before sending (broker.ErrTooLarge); the driver, which knows the encoding
	// overhead, checks the encoded size too and reports an excess as
	// TooLarge without sending anything.
	MaxHeaderSize int
	// MaxBatchSize is the largest batch driver.Topic.SendBatch accepts (0: no limit).
	MaxBatchSize int

	// Source says which of these the driver read from the broker, which
	// it could not, and where the URL or options disagree with the broker.
	Source Source
}

// String renders the capabilities on one line, for logs and docs.
func (c Topic) String() string {
	var b strings.Builder
	if c.OrderingKey != "" {
		fmt.Fprintf(&b, "key=%s ", c.OrderingKey)
	}
	if c.KeyRequired {
		b.WriteString("key-required ")
	}
	fmt.Fprintf(&b, "dedup=%s/%s max-size=%d", c.DedupWindow, c.DedupScope, c.MaxMessageSize)
	if c.MaxHeaderSize > 0 {
		fmt.Fprintf(&b, " max-header-size=%d", c.MaxHeaderSize)
	}
	if c.MaxBatchSize > 0 {
		fmt.Fprintf(&b, " max-batch=%d", c.MaxBatchSize)
	}
	return b.String()
}

// Subscription is what a broker promises to a consumer, as
// data: the delivery half of its promise (order as delivered, what an ack
// covers, the delivery count and limit, dead letters, locks, nack delays,
// how long copies keep coming). The conformance suite checks every field
// against the live broker.
type Subscription struct {
	// Ordering is the scope inside which publish order is delivery order.
	Ordering OrderingScope
	// HeadOfLine: while a message of a scope is delivered and unsettled, no
	// later message of the same scope is delivered to any consumer.
	HeadOfLine bool

	// AckModel is what an ack covers.
	AckModel AckModel

	// DeliveryCount: broker.Delivery.Attempt is a true count kept by
	// the broker (or emulated, for LimitEmulated), not a guess.
	DeliveryCount bool
	// DeliveryLimit is the number of deliveries after which the message is
	// dead-lettered instead of delivered again (0: no limit).
	DeliveryLimit int
	// DeliveryLimitMode says who enforces DeliveryLimit.
	DeliveryLimitMode LimitMode
	// DeadLetter: broker.Delivery.DeadLetter is supported, and dead-lettered
	// messages can be read, with their reason.
	DeadLetter bool

	// LockTimeout is how long a delivery stays locked (invisible to other
	// consumers) before the broker redelivers it (0: until settled or the
	// consumer goes away; LockNone: not locked at all, redelivered at
	// once). Where Source.Unread lists SettingLockTimeout, the driver could
	// not read the lock's bound (RabbitMQ's consumer_timeout), and the
	// value is not the broker's.
	LockTimeout time.Duration
	// LockExtendable: broker.Delivery.ExtendLock is supported.
	LockExtendable bool
	// NackDelay: broker.Delivery.Nack honours a delay; without it only a zero delay
	// is accepted.
	NackDelay bool

	// RedeliveryHorizon is how long after its first delivery a copy of a
	// message can still arrive (retention, replay, delayed retries). An
	// inbox must keep its records at least this long. HorizonUnknown (0)
	// means the driver does not know; HorizonUnbounded means copies can
	// arrive at any time.
	RedeliveryHorizon time.Duration

	// Source says which of these the driver read from the broker, which
	// it could not, and where the URL or options disagree with the broker.
	Source Source
}

// String renders the capabilities on one line, for logs and docs.
func (c Subscription) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ordering=%s", c.Ordering)
	if c.HeadOfLine {
		b.WriteString(" head-of-line")
	}
	fmt.Fprintf(&b, " ack=%s delivery-limit=%d(%s) dead-letter=%t count=%t", c.AckModel, c.DeliveryLimit, c.DeliveryLimitMode, c.DeadLetter, c.DeliveryCount)
	lock := c.LockTimeout.String()
	switch {
	case c.Source.IsUnread(SettingLockTimeout):
		lock = "unknown"
	case c.LockTimeout == LockNone:
		lock = "none"
	}
	fmt.Fprintf(&b, " lock=%s extend=%t nack-delay=%t horizon=%s", lock, c.LockExtendable, c.NackDelay, HorizonString(c.RedeliveryHorizon))
	return b.String()
}

// HorizonString renders a redelivery horizon: "unknown", "unbounded" or
// the duration.
func HorizonString(h time.Duration) string {
	switch {
	case h == HorizonUnbounded:
		return "unbounded"
	case h <= HorizonUnknown:
		return "unknown"
	}
	return h.String()
}

// Setting names a broker setting that a field of the capabilities stands
// for, in a Source.
type Setting string

// The settings a Source speaks of.
const (
	// SettingDeliveryLimit: DeliveryLimit and DeliveryLimitMode (RabbitMQ's
	// x-delivery-limit or delivery-limit policy, SQS's redrive
	// maxReceiveCount, Service Bus's MaxDeliveryCount).
	SettingDeliveryLimit Setting = "delivery limit"
	// SettingDeadLetter: DeadLetter (a dead-letter exchange, a redrive
	// target, a dead-letter topic).
	SettingDeadLetter Setting = "dead-letter target"
	// SettingOrdering: Ordering and HeadOfLine (a single active consumer,
	// sessions, a FIFO queue).
	SettingOrdering Setting = "ordering"
	// SettingLockTimeout: LockTimeout (a visibility timeout, a lock
	// duration).
	SettingLockTimeout Setting = "lock timeout"
	// SettingRedeliveryHorizon: RedeliveryHorizon (a retention period, a
	// time to live).
	SettingRedeliveryHorizon Setting = "redelivery horizon"
	// SettingDedupWindow: DedupWindow and DedupScope.
	SettingDedupWindow Setting = "dedup window"
	// SettingMaxMessageSize: MaxMessageSize.
	SettingMaxMessageSize Setting = "max message size"
	// SettingQueueLength: a bound on the queue's length and what happens
	// past it (RabbitMQ's x-max-length and x-overflow), which the
	// capabilities have no field for: a queue that drops or dead-letters
	// its oldest messages when full loses or diverts messages no handler
	// saw.
	SettingQueueLength Setting = "queue length"
	// SettingKind: what an entity is, in the broker's words (a RabbitMQ
	// queue's type, an exchange's type), which decides what the others
	// can mean.
	SettingKind Setting = "kind"
)

// Source says where a side's capabilities come from: what the driver read
// from the live broker, which settings it could not read, and where the
// URL or options state other values than the broker holds. A driver that
// reads nothing leaves Read empty and lists, in Unread, the settings its
// fields merely repeat from the URL or options.
type Source struct {
	// Read says, for people, what the driver read from the broker and
	// through which interface, e.g. "quorum queue shop.billing and its
	// policy, through the management API". Empty: nothing was read.
	Read string `json:"read,omitempty"`
	// Unread are the settings the driver could not read from the broker.
	// Their fields hold what the URL or options stated, or the driver's
	// default, which a statement does not present as the broker's.
	Unread []Unread `json:"unread,omitempty"`
	// Conflicts are the settings for which the URL or options state a
	// value other than the one the broker holds. The fields hold the
	// broker's value: it is the one that applies.
	Conflicts []Conflict `json:"conflicts,omitempty"`
}

// Unread is a setting a driver could not read from the broker.
type Unread struct {
	Setting Setting `json:"setting"`
	// Why it could not be read, and Fix, how to make it readable. Neither
	// holds a secret.
	Why string `json:"why"`
	Fix string `json:"fix"`
}

// Conflict is a setting whose value the URL or options state otherwise
// than the broker holds.
type Conflict struct {
	Setting Setting `json:"setting"`
	// Stated is the URL's or options' value, Held the broker's, both for
	// people (e.g. "delivery_limit=5 in the URL", "20 deliveries
	// (x-delivery-limit 19)").
	Stated string `json:"stated"`
	Held   string `json:"held"`
	// Fix says how to make them agree.
	Fix string `json:"fix"`
}

// IsUnread reports whether s could not be read from the broker.
func (src Source) IsUnread(s Setting) bool {
	return slices.ContainsFunc(src.Unread, func(u Unread) bool { return u.Setting == s })
}
