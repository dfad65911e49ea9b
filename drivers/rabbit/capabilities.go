package rabbit

import "github.com/wary-go/wary/broker/driver"

// topicCaps is what a topic publishing to partitions queues (0 or 1: one
// queue) with a size limit over a connection of frameMax (0: unlimited)
// promises a publisher.
func topicCaps(partitions, maxMessageSize, frameMax int) driver.TopicCapabilities {
	caps := driver.TopicCapabilities{
		OrderingKey:    "routing key (one queue, single active consumer)",
		DedupWindow:    0, // RabbitMQ has no broker-side dedup
		DedupScope:     driver.DedupNone,
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
	noOrder       bool // a queue without a single active consumer
	noCount       bool // not a quorum queue: no delivery count
}

func (c subCaps) capabilities() driver.SubscriptionCapabilities {
	caps := driver.SubscriptionCapabilities{
		// A queue with a single active consumer delivers in queue order;
		// one queue per partition keeps order per key.
		Ordering: driver.OrderQueue,
		// With a prefetch above one, later messages reach the consumer
		// while an earlier one is unsettled.
		HeadOfLine: false,
		AckModel:   driver.AckPerMessage,
		// Quorum queues count returns in x-delivery-count.
		DeliveryCount: true,
		DeliveryLimit: c.deliveryLimit,
		DeadLetter:    c.deadLetter,
		// No lock timeout: a delivery stays with its consumer until settled
		// or the channel closes (RabbitMQ's consumer_timeout, 30 minutes by
		// default, closes the channel of a consumer that holds one longer).
		LockTimeout:    0,
		LockExtendable: false,
		NackDelay:      c.nackDelay,
		// Unbounded: a quorum queue keeps a message, and delivers it again,
		// until it is acked (a consumer may hold it unsettled for as long
		// as its channel lives), and a delayed nack parks it in a delay
		// queue for up to MaxNackDelay (24h) each time. No time after its
		// first delivery bounds when a copy can come back, so an inbox must
		// keep its records until told otherwise.
		RedeliveryHorizon: driver.HorizonUnbounded,
	}
	if c.partitions > 1 {
		caps.Ordering = driver.OrderPartition
	}
	if c.noOrder {
		caps.Ordering = driver.OrderNone
	}
	if c.noCount {
		caps.DeliveryCount = false
	}
	if c.deliveryLimit > 0 {
		caps.DeliveryLimitMode = driver.LimitNative
	}
	return caps
}
