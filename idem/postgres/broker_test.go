package postgres_test

import (
	"testing"
	"time"

	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/internal/idemtest"
)

// memoryBroker is the in-memory driver (Queue profile, no dedup, no
// delivery limit) on a fake clock.
func memoryBroker(t testing.TB) idemtest.Broker {
	const lock = 5 * time.Second
	topic, subscribe, clock, dead := memoryTopic(t, &memory.TopicConfig{Profile: memory.Queue, LockTimeout: lock, DeliveryLimit: -1})
	return idemtest.Broker{Topic: topic, Subscribe: subscribe, Advance: clock.Advance, LockTimeout: lock, DeadLetters: dead}
}

func TestStoreWithMemoryBroker(t *testing.T) {
	idemtest.RunBroker(t, newDB, memoryBroker)
}
