package gcppubsub

import (
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/wary-go/wary/conformance/capsdoc"
)

// TestDocCapabilities: docs/brokers/gcppubsub.md shows what the driver
// declares from the subscription configurations it names (Pub/Sub's
// defaults otherwise), with the topic sending keys as ordering keys when
// the subscription orders.
func TestDocCapabilities(t *testing.T) {
	col := func(name string, s *pubsubpb.Subscription) capsdoc.Column {
		s.Name, s.Topic = "projects/p/subscriptions/orders", "projects/p/topics/orders"
		c := configOf(s)
		return capsdoc.Column{Name: name, Topic: topicCapabilities(c.Ordering), Sub: c.capabilities()}
	}
	dead := &pubsubpb.DeadLetterPolicy{DeadLetterTopic: "projects/p/topics/orders-dead", MaxDeliveryAttempts: 5}
	capsdoc.Check(t, "../../docs/brokers/gcppubsub.md", []capsdoc.Column{
		col("defaults", &pubsubpb.Subscription{}),
		col("message ordering, dead-letter policy 5 attempts", &pubsubpb.Subscription{EnableMessageOrdering: true, DeadLetterPolicy: dead}),
		col("exactly-once, ack deadline 60 s, dead-letter policy 5 attempts", &pubsubpb.Subscription{EnableExactlyOnceDelivery: true, AckDeadlineSeconds: 60, DeadLetterPolicy: dead}),
	})
}
