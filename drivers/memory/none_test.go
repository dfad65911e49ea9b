package memory_test

import (
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/memory"
)

// both are a topic's and a subscription's halves, for checks on either.
type both struct {
	capability.Topic
	capability.Subscription
}

// TestNoneDeclaredAndBehaved: each negative ("none") value of TopicConfig
// is declared as none by the side that owns it: the topic's or the
// subscription's capabilities (and TopicConfig's), and behaves as none.
func TestNoneDeclaredAndBehaved(t *testing.T) {
	check := func(t *testing.T, f *fixture, s *broker.Subscription, cfg memory.TopicConfig, ok func(both) bool) {
		t.Helper()
		got, _ := f.b.TopicConfig("t")
		for name, c := range map[string]both{
			"topic and subscription": {f.topic.Capabilities(), s.Capabilities()},
			"TopicConfig":            {cfg.TopicCapabilities(), cfg.SubscriptionCapabilities()},
			"Broker.TopicConfig":     {got.TopicCapabilities(), got.SubscriptionCapabilities()},
		} {
			if !ok(c) {
				t.Errorf("%s capabilities declare a default: %v", name, c)
			}
		}
	}
	t.Run("lock", func(t *testing.T) {
		cfg := memory.TopicConfig{LockTimeout: -1}
		f := newFixture(t, cfg)
		s := f.sub()
		check(t, f, s, cfg, func(c both) bool { return c.LockTimeout == 0 && !c.LockExtendable })
		f.publish(msg("a", ""))
		pollOne(t, s, "a")
		f.clock.Advance(24 * time.Hour)
		if ds := poll(t, s, 10); len(ds) != 0 {
			t.Fatalf("the lock expired: %s", ids(ds))
		}
	})
	t.Run("limit", func(t *testing.T) {
		cfg := memory.TopicConfig{DeliveryLimit: -1}
		f := newFixture(t, cfg)
		s := f.sub()
		check(t, f, s, cfg, func(c both) bool {
			return c.DeliveryLimit == 0 && c.DeliveryLimitMode == capability.LimitNone
		})
		f.publish(msg("a", ""))
		for i := 1; i <= memory.DefaultDeliveryLimit+2; i++ {
			d := pollOne(t, s, "a")
			if d.Attempt != i {
				t.Fatalf("attempt %d, want %d", d.Attempt, i)
			}
			if err := d.Nack(bg, 0); err != nil {
				t.Fatal(err)
			}
		}
		if ds := poll(t, f.dlq(), 10); len(ds) != 0 {
			t.Fatalf("dead-lettered: %s", ids(ds))
		}
	})
	t.Run("dedup", func(t *testing.T) {
		cfg := memory.TopicConfig{Profile: memory.SQSFIFO, DedupWindow: -1}
		f := newFixture(t, cfg)
		s := f.sub()
		check(t, f, s, cfg, func(c both) bool { return c.DedupWindow == 0 && c.DedupScope == capability.DedupNone })
		f.publish(msg("a", "g"))
		f.publish(msg("a", "g"))
		for range 2 {
			d := pollOne(t, s, "a")
			if err := d.Ack(bg); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("maxsize", func(t *testing.T) {
		cfg := memory.TopicConfig{MaxMessageSize: -1}
		f := newFixture(t, cfg)
		s := f.sub()
		check(t, f, s, cfg, func(c both) bool { return c.MaxMessageSize == 0 })
		f.publish(&broker.Message{ID: "a", Body: make([]byte, 2<<20)})
		pollOne(t, s, "a")
	})
}
