package sqlite_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/idemtest"
)

// outboxBroker is the in-memory driver with the SQS FIFO profile (order
// and head-of-line per key) without dedup or delivery limit, and messages
// of at most 4 KiB.
func outboxBroker(t testing.TB) idemtest.OutboxBroker {
	b := memory.New(&memory.Options{Clock: memory.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))})
	const maxSize = 4 << 10
	cfg := &memory.TopicConfig{Profile: memory.SQSFIFO, DedupWindow: -1, DeliveryLimit: -1, MaxMessageSize: maxSize}
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
	return idemtest.OutboxBroker{
		Topic: topic,
		Subscribe: func(t testing.TB) *broker.Subscription {
			sub, err := b.OpenSubscription("events", "consumer", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sub.Close() })
			return sub
		},
		MaxMessageSize: maxSize,
	}
}

var _ idemtest.Factory[*sql.Tx] = newDB

func TestOutbox(t *testing.T) {
	idemtest.RunOutbox(t, newDB, outboxBroker, idemtest.OutboxCaps{ConcurrentWriters: false})
}
