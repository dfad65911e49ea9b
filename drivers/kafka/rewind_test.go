package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestRewindAfterDataLoss: a leader moves (a new leader epoch) and the new
// leader's log ends before what the consumer had read (an unclean election:
// records 3 to 9 are gone, here by an OffsetForLeaderEpoch answer the test
// writes). kgo reports ErrDataLoss, moves the partition back to 3 and reads
// it from there. The subscription goes on (it used to fail Receive with the
// error, and the soak's consumers exited): the records from 3 are delivered
// again, flagged as redeliveries; the deliveries of records at or after 3
// from before the rewind are stale (ErrLockLost), while the one below 3,
// still unsettled, stays valid and holds the commit point; and the commit
// point follows the records fetched again, never the stale deliveries.
// kfake gets there by itself after any leader move of a partition read to
// its end (see TestSoakKafka), through a reset to the start instead.
func TestRewindAfterDataLoss(t *testing.T) {
	e := newTestEnv(t, kfake.NumBrokers(1))
	requireFake(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := e.createTopic(t, 1, "rewind")
	group := uniqueName("g")
	top, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	const n, resetTo = 10, 3
	for i := range n {
		if err := top.Publish(ctx, &broker.Message{ID: fmt.Sprint("m", i), Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := e.openSub(ctx, t, topic, group, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	receive := func(want int) []*broker.Delivery {
		t.Helper()
		var ds []*broker.Delivery
		for len(ds) < want {
			got, err := sub.Receive(ctx, want-len(ds))
			if err != nil {
				t.Fatalf("receive after %d of %d: %v", len(ds), want, err)
			}
			ds = append(ds, got...)
		}
		return ds
	}
	first := receive(n)
	for i, d := range first {
		if d.Message.ID != fmt.Sprint("m", i) {
			t.Fatalf("delivery %d is %s", i, d.Message.ID)
		}
	}
	if errs := broker.AckAll(ctx, first[:2]); errs != nil {
		t.Fatal(errs)
	}

	// The client validates its position with the new leader, which says
	// that the epoch it consumed at ended at offset 3.
	e.fake.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.OffsetForLeaderEpochRequest)
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, rp.LeaderEpoch, resetTo
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	e.fake.ShufflePartitionLeaders()

	again := receive(n - resetTo)
	for i, d := range again {
		if id := fmt.Sprint("m", resetTo+i); d.Message.ID != id || d.Attempt != 2 {
			t.Fatalf("after the reset, delivery %d is %s attempt %d, want %s attempt 2", i, d.Message.ID, d.Attempt, id)
		}
	}
	for _, d := range first[resetTo:] {
		if err := d.Ack(ctx); !errors.Is(err, broker.ErrLockLost) {
			t.Fatalf("ack of %s from before the reset: %v, want ErrLockLost", d.Message.ID, err)
		}
	}
	if got := committed(ctx, t, e, group); got != 2 {
		t.Fatalf("committed offset %d after stale acks, want 2", got)
	}
	if errs := broker.AckAll(ctx, again); errs != nil {
		t.Fatal(errs)
	}
	// m2 is still unsettled: the commit point stays before it.
	if got := committed(ctx, t, e, group); got != 2 {
		t.Fatalf("committed offset %d with m2 unsettled, want 2", got)
	}
	if err := first[2].Ack(ctx); err != nil {
		t.Fatalf("ack of m2, below the reset offset: %v", err)
	}
	if got := committed(ctx, t, e, group); got != n {
		t.Fatalf("committed offset %d, want %d", got, n)
	}
}

func committed(ctx context.Context, t *testing.T, e *testEnv, group string) int64 {
	t.Helper()
	offs, err := e.admin.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var at int64 = -1
	offs.Each(func(o kadm.OffsetResponse) { at = o.At })
	return at
}
