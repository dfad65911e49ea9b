package mysql_test

import (
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
)

// memoryTopic creates topic "events" with one subscription on a fresh
// in-memory broker with a fake clock, and returns the topic, an opener of
// competing consumers (closed at cleanup), the clock and an opener of
// consumers on the subscription's dead-letter queue.
func memoryTopic(t testing.TB, cfg *memory.TopicConfig) (*broker.Topic, func(testing.TB) *broker.Subscription, *memory.FakeClock, func(testing.TB) *broker.Subscription) {
	clock := memory.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	b := memory.New(&memory.Options{Clock: clock})
	if err := b.CreateTopic("events", cfg); err != nil {
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
	subscribe := func(t testing.TB) *broker.Subscription {
		sub, err := b.OpenSubscription("events", "consumer", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		return sub
	}
	deadLetters := func(t testing.TB) *broker.Subscription {
		sub, err := b.OpenDeadLetters("events", "consumer", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		return sub
	}
	return topic, subscribe, clock, deadLetters
}
