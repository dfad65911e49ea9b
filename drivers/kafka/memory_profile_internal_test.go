package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/conformance/capsdoc"
	"github.com/wary-go/wary/drivers/memory"
)

// TestMemoryProfile: the memory broker's partitioned profile, configured
// as a subscription with a dead-letter topic is (its delivery limit, the
// topic's size limit and retention), promises exactly what the driver
// declares for it, on both sides. (An Ordered subscription, with
// head-of-line blocking per partition, has no memory imitation.)
func TestMemoryProfile(t *testing.T) {
	for _, limit := range []int{1, 10} {
		o := &SubscriptionOptions{DeadLetterTopic: "orders.dlt", DeliveryLimit: limit}
		const maxMsg, horizon = 1 << 20, 7 * 24 * time.Hour
		cfg := memory.TopicConfig{Profile: memory.Partitioned, DeliveryLimit: limit, MaxMessageSize: maxMsg - recordOverhead, MessageRetention: horizon}
		capsdoc.Same(t,
			capsdoc.Column{Name: "memory " + cfg.String(), Topic: cfg.TopicCapabilities(), Sub: cfg.SubscriptionCapabilities()},
			capsdoc.Column{Name: fmt.Sprintf("a subscription with a dead-letter topic and delivery limit %d", limit), Topic: topicCaps(maxMsg), Sub: subCaps(o, horizon)})
	}
}
