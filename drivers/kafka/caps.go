package kafka

import (
	"time"

	"github.com/wary-go/wary/broker/driver"
)

// capsFor is what a message path promises: a topic and the subscriptions
// configured with o. maxMsg is the smaller of the topic's
// max.message.bytes and the producer's batch limit; horizon is the path's
// (see horizonOf and describePath).
func capsFor(o *SubscriptionOptions, maxMsg int, horizon time.Duration) driver.Capabilities {
	c := driver.Capabilities{
		Ordering:    driver.OrderPartition,
		OrderingKey: "record key",
		HeadOfLine:  o.Ordered,
		AckModel:    driver.AckCumulative,
		// The count is kept in memory (and in retry-topic headers); a
		// consumer crash loses the count of records handed out since the
		// last commit, so it is not a true count: see the package doc.
		DeliveryCount:     false,
		DeliveryLimit:     o.DeliveryLimit,
		DeadLetter:        o.DeadLetterTopic != "",
		NackDelay:         true,
		RedeliveryHorizon: horizon,
		MaxMessageSize:    maxMsg - recordOverhead,
	}
	if o.DeliveryLimit > 0 {
		c.DeliveryLimitMode = driver.LimitEmulated
	}
	return c
}
