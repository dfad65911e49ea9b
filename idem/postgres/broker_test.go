package postgres_test

import (
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/idemtest"
)

// memoryBroker is the in-memory driver (Queue profile, no dedup, no
// delivery limit) on a fake clock.
func memoryBroker(t testing.TB) idemtest.Broker {
	clock := memory.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	b := memory.New(&memory.Options{Clock: clock})
	const lock = 5 * time.Second
	if err := b.CreateTopic("events", &memory.TopicConfig{Profile: memory.Queue, LockTimeout: lock, DeliveryLimit: -1}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("events", "consumer"); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close(); b.Close() })
	return idemtest.Broker{
		Topic: topic,
		Subscribe: func(t testing.TB) *broker.Subscription {
			sub, err := b.OpenSubscription("events", "consumer", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sub.Close() })
			return sub
		},
		Advance:     clock.Advance,
		LockTimeout: lock,
	}
}

func TestStoreWithMemoryBroker(t *testing.T) {
	idemtest.RunBroker(t, newDB, memoryBroker)
}
