package rabbit

import (
	"testing"

	"github.com/wary-go/wary/conformance/capsdoc"
)

// TestDocCapabilities: docs/brokers/rabbitmq.md shows what the driver
// declares for the configurations it names, on a connection with
// RabbitMQ's default frame_max (128 KiB).
func TestDocCapabilities(t *testing.T) {
	const frameMax = 128 << 10
	col := func(name string, partitions int, c subCaps) capsdoc.Column {
		c.partitions = partitions
		return capsdoc.Column{Name: name, Topic: topicCaps(partitions, 0, frameMax), Sub: c.capabilities()}
	}
	capsdoc.Check(t, "../../docs/brokers/rabbitmq.md", []capsdoc.Column{
		col("quorum queue, `delivery_limit=5`, `dead_letter_exchange`, `nack_delay=true`", 0, subCaps{deliveryLimit: 5, deadLetter: true, nackDelay: true}),
		col("the same, `partitions=4`", 4, subCaps{deliveryLimit: 5, deadLetter: true, nackDelay: true}),
		col("quorum queue, `NoDeliveryLimit`", 0, subCaps{}),
		col("classic queue without single active consumer", 0, subCaps{noOrder: true, noCount: true}),
	})
}
