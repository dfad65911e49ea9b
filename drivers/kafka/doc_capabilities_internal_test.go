package kafka

import (
	"testing"

	"github.com/wary-go/wary/conformance/capsdoc"
)

// TestDocCapabilities: docs/brokers/kafka.md shows what the driver
// declares for the configurations it names, on a topic with Kafka's
// defaults (max.message.bytes 1048588, retention.ms and segment.ms 7
// days), as the driver reads them at open.
func TestDocCapabilities(t *testing.T) {
	const maxMsg = 1048588
	horizon := horizonOf(map[string]string{"retention.ms": "604800000", "segment.ms": "604800000", "cleanup.policy": "delete"})
	col := func(name string, o SubscriptionOptions) capsdoc.Column {
		return capsdoc.Column{Name: name, Topic: topicCaps(maxMsg), Sub: subCaps(&o, horizon)}
	}
	capsdoc.Check(t, "../../docs/brokers/kafka.md", []capsdoc.Column{
		col("`Ordered`, `delivery_limit=5`, `dead_letter_topic`", SubscriptionOptions{Ordered: true, DeliveryLimit: 5, DeadLetterTopic: "orders.dlq"}),
		col("concurrent (not `Ordered`), no limit", SubscriptionOptions{}),
	})
}
