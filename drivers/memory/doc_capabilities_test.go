package memory_test

import (
	"testing"

	"github.com/wary-go/wary/conformance/capsdoc"
	"github.com/wary-go/wary/drivers/memory"
)

// TestDocCapabilities: docs/brokers/memory.md shows what each profile
// declares with its defaults.
func TestDocCapabilities(t *testing.T) {
	var cols []capsdoc.Column
	for _, p := range []struct {
		name    string
		profile memory.Profile
	}{{"`queue`", memory.Queue}, {"`partitioned`", memory.Partitioned}, {"`sqsfifo`", memory.SQSFIFO}, {"`servicebus`", memory.ServiceBus}} {
		c := memory.TopicConfig{Profile: p.profile}
		cols = append(cols, capsdoc.Column{Name: p.name, Topic: c.TopicCapabilities(), Sub: c.SubscriptionCapabilities()})
	}
	capsdoc.Check(t, "../../docs/brokers/memory.md", cols)
}
