package sqsfifo

import (
	"testing"

	"github.com/wary-go/wary/conformance/capsdoc"
)

// TestDocCapabilities: docs/brokers/sqs-fifo.md shows what the driver
// declares from the queue attributes it names (SQS's defaults otherwise).
func TestDocCapabilities(t *testing.T) {
	col := func(name string, attrs map[string]string) capsdoc.Column {
		tc, sc, _, err := capsFromAttributes(attrs, 0)
		if err != nil {
			t.Fatal(err)
		}
		return capsdoc.Column{Name: name, Topic: tc, Sub: sc}
	}
	redrive := `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:orders-dlq.fifo","maxReceiveCount":5}`
	capsdoc.Check(t, "../../docs/brokers/sqs-fifo.md", []capsdoc.Column{
		col("defaults, RedrivePolicy `maxReceiveCount` 5", map[string]string{"FifoQueue": "true", "RedrivePolicy": redrive}),
		col("`DeduplicationScope` messageGroup, no RedrivePolicy", map[string]string{"FifoQueue": "true", "DeduplicationScope": "messageGroup"}),
	})
}
