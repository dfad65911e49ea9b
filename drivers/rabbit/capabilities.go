package rabbit

import "github.com/wary-go/wary/broker/driver"

// capsConfig is what decides the capabilities; topic and subscription
// derive theirs from the same fields, so that they agree.
type capsConfig struct {
	partitions     int
	maxMessageSize int
	deliveryLimit  int // in deliveries, the server's default resolved; 0: none
	deadLetter     bool
	nackDelay      bool
	frameMax       int // the connection's negotiated frame_max (0: unlimited)
}

func (c capsConfig) capabilities() driver.Capabilities {
	caps := driver.Capabilities{
		// A queue with a single active consumer delivers in queue order;
		// one queue per partition keeps order per key.
		Ordering:    driver.OrderQueue,
		OrderingKey: "routing key (one queue, single active consumer)",
		// With a prefetch above one, later messages reach the consumer
		// while an earlier one is unsettled.
		HeadOfLine:  false,
		DedupWindow: 0, // RabbitMQ has no broker-side dedup
		DedupScope:  driver.DedupNone,
		AckModel:    driver.AckPerMessage,
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
		MaxMessageSize:    c.maxMessageSize,
		// Properties and headers travel in one frame of at most frame_max
		// bytes; a larger one closes the connection. The budget is
		// frame_max less headerReserve (see there for the rule); each
		// publish also checks the exact encoded size.
		MaxHeaderSize: headerBudget(c.frameMax),
		MaxBatchSize:  0,
	}
	if c.partitions > 1 {
		caps.Ordering = driver.OrderPartition
		caps.OrderingKey = "key hash to a partition queue (single active consumer each)"
	}
	if c.deliveryLimit > 0 {
		caps.DeliveryLimitMode = driver.LimitNative
	}
	if caps.MaxMessageSize <= 0 {
		caps.MaxMessageSize = DefaultMaxMessageSize
	}
	return caps
}
