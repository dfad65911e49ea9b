package rabbit

import (
	"fmt"
	"strings"

	"github.com/wary-go/wary/broker/capability"
)

// topicCaps is what a topic publishing to partitions queues (0 or 1: one
// queue) with a size limit over a connection of frameMax (0: unlimited)
// promises a publisher.
func topicCaps(partitions, maxMessageSize, frameMax int) capability.Topic {
	caps := capability.Topic{
		OrderingKey:    "routing key (one queue, single active consumer)",
		DedupWindow:    0, // RabbitMQ has no broker-side dedup
		DedupScope:     capability.DedupNone,
		MaxMessageSize: maxMessageSize,
		// Properties and headers travel in one frame of at most frame_max
		// bytes; a larger one closes the connection. The budget is
		// frame_max less headerReserve (see there for the rule); each
		// publish also checks the exact encoded size.
		MaxHeaderSize: headerBudget(frameMax),
		MaxBatchSize:  0,
	}
	if partitions > 1 {
		caps.OrderingKey = "key hash to a partition queue (single active consumer each)"
	}
	if caps.MaxMessageSize <= 0 {
		caps.MaxMessageSize = DefaultMaxMessageSize
	}
	return caps
}

// subCaps is the delivery half of the promise.
type subCaps struct {
	partitions    int
	deliveryLimit int // in deliveries, the server's default resolved; 0: none
	deadLetter    bool
	nackDelay     bool
	noOrder       bool   // a queue without a single active consumer
	orderUnread   bool   // whether the queues have one could not be read
	noCount       bool   // not a quorum queue: no delivery count
	lockNote      string // what the queues declare of a consumer timeout, for the lock's Why ("": nothing)
}

func (c subCaps) capabilities() capability.Subscription {
	caps := capability.Subscription{
		// A queue with a single active consumer delivers in queue order;
		// one queue per partition keeps order per key.
		Ordering: capability.OrderQueue,
		// With a prefetch above one, later messages reach the consumer
		// while an earlier one is unsettled.
		HeadOfLine: false,
		AckModel:   capability.AckPerMessage,
		// Quorum queues count returns in x-delivery-count.
		DeliveryCount: true,
		DeliveryLimit: c.deliveryLimit,
		DeadLetter:    c.deadLetter,
		// A delivery stays with its consumer until settled or the channel
		// closes, and RabbitMQ closes the channel of a consumer that holds
		// one longer than its consumer_timeout: a bound the driver cannot
		// read, so the lock is unread (lockUnread), not "held until
		// settled". 0 is what the field holds for it; nothing extends it.
		LockTimeout:    0,
		LockExtendable: false,
		NackDelay:      c.nackDelay,
		// Unbounded: a quorum queue keeps a message, and delivers it again,
		// until it is acked (a consumer may hold it unsettled for as long
		// as its channel lives), and a delayed nack parks it in a delay
		// queue for up to MaxNackDelay (24h) each time. No time after its
		// first delivery bounds when a copy can come back, so an inbox must
		// keep its records until told otherwise.
		RedeliveryHorizon: capability.HorizonUnbounded,
	}
	if c.partitions > 1 {
		caps.Ordering = capability.OrderPartition
	}
	// An order that could not be read is none: what a consumer may rely
	// on, while Source.Unread states it as unknown, not as none.
	if c.noOrder || c.orderUnread {
		caps.Ordering = capability.OrderNone
	}
	if c.noCount {
		caps.DeliveryCount = false
	}
	if c.deliveryLimit > 0 {
		caps.DeliveryLimitMode = capability.LimitNative
	}
	caps.Source.Unread = []capability.Unread{lockUnread(c.lockNote)}
	return caps
}

// lockUnread is the lock's entry in Source.Unread, on every RabbitMQ
// subscription: RabbitMQ closes, with PRECONDITION_FAILED, the channel of
// a consumer that holds a delivery unacknowledged longer than
// consumer_timeout, and requeues what the channel held; consumer_timeout
// is a server-wide setting (rabbitmq.conf, 30 minutes by default) that
// neither AMQP nor the management API shows. note says what the queues
// declare of a timeout of their own (consumerTimeoutNote).
func lockUnread(note string) capability.Unread {
	why := "RabbitMQ closes the channel of a consumer that holds a delivery unacknowledged longer than consumer_timeout, and requeues the delivery; " +
		"consumer_timeout is a server-wide setting (30 minutes by default) that neither AMQP nor the management API shows"
	if note != "" {
		why += "; " + note
	}
	return capability.Unread{Setting: capability.SettingLockTimeout, Why: why,
		Fix: "it cannot be read remotely: look it up on the server (consumer_timeout in rabbitmqctl environment or rabbitmq.conf) and keep every handler well within it"}
}

// consumerTimeoutNote says what queues hs declare as x-consumer-timeout
// on server v ("": none declares one, or it was not seen). RabbitMQ sets a
// queue's consumer timeout from it from 3.12 (3.11.15), the lower of it
// and a consumer-timeout policy; earlier servers accept the argument and
// ignore it. The driver states neither as the lock: it reads no policy
// key, and a server that applies the argument is not one its tests run.
func consumerTimeoutNote(hs []heldQueue, v serverVersion) string {
	var parts []string
	for _, h := range hs {
		if h.consumerTimeout != nil {
			parts = append(parts, fmt.Sprintf("%s: %d ms", h.name, *h.consumerTimeout))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	what := "the queue declares x-consumer-timeout (" + strings.Join(parts, ", ") + ")"
	if len(parts) > 1 {
		what = "the queues declare x-consumer-timeout (" + strings.Join(parts, ", ") + ")"
	}
	if v.known && (v.major < 3 || v.major == 3 && v.minor < 11) {
		return what + ", which RabbitMQ " + v.String() + " ignores: a timeout per queue came with RabbitMQ 3.12, and before it consumer_timeout applies"
	}
	return what + ", which RabbitMQ applies from 3.12 in place of consumer_timeout (the lower of it and a consumer-timeout policy, which the driver does not read)"
}
