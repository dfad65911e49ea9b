package servicebus

import (
	"testing"
	"time"

	"github.com/wary-go/wary/conformance/capsdoc"
)

// TestDocCapabilities: docs/brokers/servicebus.md shows what the driver
// declares for entities with the properties it names (a Standard
// namespace's defaults otherwise).
func TestDocCapabilities(t *testing.T) {
	col := func(name string, p entityProps, isQueue bool) capsdoc.Column {
		p = p.withDefaults()
		return capsdoc.Column{Name: name, Topic: p.topicCaps(), Sub: entityCaps(p, isQueue, false)}
	}
	base := entityProps{DuplicateDetectionWindow: 10 * time.Minute, DefaultMessageTimeToLive: 14 * 24 * time.Hour}
	sessions := base
	sessions.RequiresSession = true
	capsdoc.Check(t, "../../docs/brokers/servicebus.md", []capsdoc.Column{
		col("session queue", sessions, true),
		col("queue without sessions", base, true),
		col("subscription without sessions", base, false),
	})
}
