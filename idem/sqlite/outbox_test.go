package sqlite_test

import (
	"database/sql"
	"testing"

	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/internal/idemtest"
)

// outboxBroker is the in-memory driver with the SQS FIFO profile (order
// and head-of-line per key) without dedup or delivery limit, and messages
// of at most 4 KiB.
func outboxBroker(t testing.TB) idemtest.OutboxBroker {
	const maxSize = 4 << 10
	topic, subscribe, _, _ := memoryTopic(t, &memory.TopicConfig{Profile: memory.SQSFIFO, DedupWindow: -1, DeliveryLimit: -1, MaxMessageSize: maxSize})
	return idemtest.OutboxBroker{Topic: topic, Subscribe: subscribe, MaxMessageSize: maxSize}
}

var _ idemtest.Factory[*sql.Tx] = newDB

func TestOutbox(t *testing.T) {
	idemtest.RunOutbox(t, newDB, outboxBroker, idemtest.OutboxCaps{ConcurrentWriters: false})
}
