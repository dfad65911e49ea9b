package mysql_test

import (
	"database/sql"
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

// outboxBroker is the in-memory driver with the SQS FIFO profile (order
// and head-of-line per key) without dedup or delivery limit, and messages
// of at most 4 KiB.
func outboxBroker(t testing.TB) idemtest.OutboxBroker {
	const maxSize = 4 << 10
	topic, subscribe, _, _ := memoryTopic(t, &memory.TopicConfig{Profile: memory.SQSFIFO, DedupWindow: -1, DeliveryLimit: -1, MaxMessageSize: maxSize})
	return idemtest.OutboxBroker{Topic: topic, Subscribe: subscribe, MaxMessageSize: maxSize}
}

var _ idemtest.Factory[*sql.Tx] = newDB

func TestStoreWithMemoryBroker(t *testing.T) {
	idemtest.RunBroker(t, newDB, memoryBroker)
}

func TestOutbox(t *testing.T) {
	idemtest.RunOutbox(t, newDB, outboxBroker, idemtest.OutboxCaps{ConcurrentWriters: true, Polls: true})
}

// TestOutboxOfNew is the outbox's suite on stores of New: the relays'
// claims in transactions begun on the program's database.
func TestOutboxOfNew(t *testing.T) {
	idemtest.RunOutbox(t, newDBOfNew, outboxBroker, idemtest.OutboxCaps{ConcurrentWriters: true, Polls: true})
}
