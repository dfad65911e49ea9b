package kafka_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

// commitCounter counts the OffsetCommit requests a client writes.
type commitCounter struct{ n atomic.Int64 }

func (c *commitCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == (&kmsg.OffsetCommitRequest{}).Key() && err == nil {
		c.n.Add(1)
	}
}

// TestAckAllOneCommit: broker.AckAll of 50 deliveries, from two
// partitions, makes one offset commit, which covers all of them.
func TestAckAllOneCommit(t *testing.T) {
	e := newTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := e.createTopic(t, 2, "ackall")
	top, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	const n = 50
	var msgs []*broker.Message
	for i := range n {
		msgs = append(msgs, &broker.Message{ID: fmt.Sprint("m", i), Key: fmt.Sprint("k", i%7), Body: []byte("x")})
	}
	if err := top.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	var commits commitCounter
	group := uniqueName("g")
	sub, err := e.openSub(ctx, t, topic, group, nil, kgo.WithHooks(&commits))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var ds []*broker.Delivery
	for len(ds) < n {
		got, err := sub.Receive(ctx, n-len(ds))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, got...)
	}
	before := commits.n.Load()
	if errs := broker.AckAll(ctx, ds); errs != nil {
		t.Fatalf("AckAll: %v", errs)
	}
	if got := commits.n.Load() - before; got != 1 {
		t.Errorf("%d offset commits for %d acks, want 1", got, n)
	}
	offs, err := e.admin.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != n {
		t.Errorf("committed offsets sum to %d, want %d", committed, n)
	}
}
