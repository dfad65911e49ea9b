package servicebus

import (
	"reflect"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/driver"
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
			got, want := cfg.TopicCapabilities(), p.topicCaps()
			got.Source, want.Source = driver.Source{}, driver.Source{} // where each read them
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %+v: memory %s promises a publisher\n%s\nthe driver declares\n%s", kind.name, p, cfg, got, want)
			}
			gotSub, wantSub := cfg.SubscriptionCapabilities(), entityCaps(p, kind.queue, false)
			gotSub.Source, wantSub.Source = driver.Source{}, driver.Source{}
			if !reflect.DeepEqual(gotSub, wantSub) {
				t.Errorf("%s %+v: memory %s promises a consumer\n%s\nthe driver declares\n%s", kind.name, p, cfg, gotSub, wantSub)
			}
		}
	}
}
