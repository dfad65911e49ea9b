package kafka

import (
	"time"

	"github.com/wary-go/wary/broker/capability"
)

// topicCaps is what a topic promises a publisher. maxMsg is the smaller of
// the topic's max.message.bytes and the producer's batch limit.
func topicCaps(maxMsg int) capability.Topic {
	return capability.Topic{
		OrderingKey:    "record key",
		MaxMessageSize: maxMsg - recordOverhead,
	}
}

// subCaps is what a subscription configured with o promises a consumer;
// horizon is its path's (see horizonOf and describePath): the topic's and
// the retry topic's.
func subCaps(o *SubscriptionOptions, horizon time.Duration) capability.Subscription {
	c := capability.Subscription{
		Ordering:   capability.OrderPartition,
		HeadOfLine: o.Ordered,
		AckModel:   capability.AckCumulative,
		// The count is kept in memory (and in retry-topic headers); a
		// consumer crash loses the count of records handed out since the
		// last commit, so it is not a true count: see the package doc.
		DeliveryCount:     false,
		DeliveryLimit:     o.DeliveryLimit,
		DeadLetter:        o.DeadLetterTopic != "",
		NackDelay:         true,
		RedeliveryHorizon: horizon,
	}
	if o.DeliveryLimit > 0 {
		c.DeliveryLimitMode = capability.LimitEmulated
	}
	return c
}
