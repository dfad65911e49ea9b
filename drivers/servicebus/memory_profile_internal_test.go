package servicebus

import (
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/conformance/capsdoc"
	"github.com/wary-go/wary/drivers/memory"
)

// memoryConfig is the memory broker's imitation of an entity with
// properties p (normalized), as docs/brokers/memory.md lists them: a
// program or test run on it meets the promises it would meet on that
// entity.
func memoryConfig(p entityProps, isQueue bool) memory.TopicConfig {
	c := memory.TopicConfig{
		Profile:          memory.Queue,
		LockTimeout:      p.LockDuration,
		DeliveryLimit:    p.MaxDeliveryCount,
		DedupWindow:      p.DuplicateDetectionWindow,
		MaxMessageSize:   p.MaxMessageSize - sizeHeadroom,
		MessageRetention: p.DefaultMessageTimeToLive,
		NoNackDelay:      !isQueue,
	}
	if p.RequiresSession {
		// the session lock is renewed while held: the profile's default
		c.Profile, c.LockTimeout = memory.ServiceBus, 0
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = -1
	}
	return c
}

// TestMemoryProfile: for each entity kind the driver offers (queue and
// topic subscription, each with and without sessions), the memory
// broker's imitation promises exactly what the driver declares, on both
// sides; so a program that runs on memory does not call what the entity
// refuses (a delayed Nack on a session or a subscription).
func TestMemoryProfile(t *testing.T) {
	for _, props := range []entityProps{
		{DefaultMessageTimeToLive: 14 * 24 * time.Hour},
		{LockDuration: 5 * time.Second, MaxDeliveryCount: 3, DuplicateDetectionWindow: time.Minute, MaxMessageSize: 1 << 20, DefaultMessageTimeToLive: time.Hour},
	} {
		for _, kind := range []struct {
			name            string
			queue, sessions bool
		}{
			{"queue", true, false},
			{"session queue", true, true},
			{"subscription", false, false},
			{"session subscription", false, true},
		} {
			p := props
			p.RequiresSession = kind.sessions
			p = p.withDefaults()
			cfg := memoryConfig(p, kind.queue)
			capsdoc.Same(t,
				capsdoc.Column{Name: "memory " + cfg.String(), Topic: cfg.TopicCapabilities(), Sub: cfg.SubscriptionCapabilities()},
				capsdoc.Column{Name: fmt.Sprintf("a %s with %+v", kind.name, p), Topic: p.topicCaps(), Sub: entityCaps(p, kind.queue, false)})
		}
	}
}
