package sqsfifo

import (
	"maps"
	"testing"

	"github.com/wary-go/wary/conformance/capsdoc"
)

// TestDocCapabilities: docs/brokers/sqs-fifo.md shows what the driver
// declares from the queue attributes it names (SQS's defaults otherwise),
// and for a queue that locks nothing (VisibilityTimeout 0).
func TestDocCapabilities(t *testing.T) {
	col := func(name string, attrs map[string]string) capsdoc.Column {
		// the attributes SQS returns for a queue created with its defaults
		all := map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30", "MessageRetentionPeriod": "345600", "MaximumMessageSize": "262144"}
		maps.Copy(all, attrs)
		tc, sc, _, err := capsFromAttributes(all, 0)
		if err != nil {
			t.Fatal(err)
		}
		return capsdoc.Column{Name: name, Topic: tc, Sub: sc}
	}
	redrive := `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:orders-dlq.fifo","maxReceiveCount":5}`
	capsdoc.Check(t, "../../docs/brokers/sqs-fifo.md", []capsdoc.Column{
		col("defaults, RedrivePolicy `maxReceiveCount` 5", map[string]string{"RedrivePolicy": redrive}),
		col("`DeduplicationScope` messageGroup, no RedrivePolicy", map[string]string{"DeduplicationScope": "messageGroup"}),
		col("`VisibilityTimeout` 0, RedrivePolicy `maxReceiveCount` 5", map[string]string{"VisibilityTimeout": "0", "RedrivePolicy": redrive}),
	})
}
