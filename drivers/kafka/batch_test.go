package kafka_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestBatchUnderTopicLimit: messages that each fit a topic's
// max.message.bytes are published together, though together they exceed
// it: the producer's batches respect the topic's limit.
func TestBatchUnderTopicLimit(t *testing.T) {
	e := newTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	maxBytes := "4096"
	topic := uniqueName("batch")
	resp, err := e.admin.CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": &maxBytes}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	top, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	var msgs []*broker.Message
	for i := range 4 {
		body := make([]byte, 2000) // incompressible
		rand.Read(body)
		msgs = append(msgs, &broker.Message{ID: string(rune('a' + i)), Body: body})
	}
	if err := top.Publish(ctx, msgs...); err != nil {
		t.Fatalf("four messages that each fit: %v", err)
	}
}
