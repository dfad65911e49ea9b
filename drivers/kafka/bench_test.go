package kafka_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

// The benchmarks compare wary with raw kgo on the same kfake cluster, in
// the same run: messages of 100 bytes, 8 partitions. Run with
//
//	go test -run '^$' -bench . -benchtime 20000x ./drivers/kafka/

const benchBody = 100

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkProduce(b *testing.B) {
	e := newTestEnv(b)
	body := make([]byte, benchBody)
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("kgo/batch=%d", batch), func(b *testing.B) {
			topic := e.createTopic(b, 8, "bench")
			cl := e.producer(b)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				recs := make([]*kgo.Record, n)
				for j := range recs {
					recs[j] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(j)), Value: body,
						Headers: []kgo.RecordHeader{{Key: "wary-id", Value: []byte(fmt.Sprint(i + j))}}}
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b)
		})
		b.Run(fmt.Sprintf("wary/batch=%d", batch), func(b *testing.B) {
			topic := e.createTopic(b, 8, "bench")
			top, err := kafka.OpenTopic(e.producer(b), topic, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer top.Close()
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				msgs := make([]*broker.Message, n)
				for j := range msgs {
					msgs[j] = &broker.Message{ID: fmt.Sprint(i + j), Key: fmt.Sprint(j), Body: body}
				}
				if err := top.Publish(ctx, msgs...); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b)
		})
	}
}

// fill writes n records to a new topic and returns its name.
func fill(b *testing.B, e *testEnv, n int) string {
	b.Helper()
	topic := e.createTopic(b, 8, "bench")
	cl := e.producer(b)
	body := make([]byte, benchBody)
	ctx := context.Background()
	for i := 0; i < n; i += 1000 {
		var recs []*kgo.Record
		for j := i; j < min(i+1000, n); j++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(j % 64)), Value: body,
				Headers: []kgo.RecordHeader{{Key: "wary-id", Value: []byte(fmt.Sprint(j))}}})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	return topic
}

func BenchmarkConsume(b *testing.B) {
	e := newTestEnv(b)
	b.Run("kgo/poll+mark+autocommit", func(b *testing.B) {
		topic := fill(b, e, b.N)
		b.ResetTimer()
		cl, err := kgo.NewClient(append(e.clientOpts(), kgo.ConsumerGroup(uniqueName("g")), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitMarks())...)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		got := 0
		for got < b.N {
			fs := cl.PollRecords(context.Background(), 500)
			if err := fs.Err0(); err != nil {
				b.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) { got++ })
			cl.MarkCommitRecords(fs.Records()...)
		}
		if err := cl.CommitMarkedOffsets(context.Background()); err != nil {
			b.Fatal(err)
		}
		reportRate(b)
	})
	for _, c := range []struct {
		name string
		opts kafka.SubscriptionOptions
		run  bool
	}{
		{"wary/receive+ack/commit-interval=1s", kafka.SubscriptionOptions{CommitInterval: time.Second}, false},
		{"wary/run-concurrency=64/commit-interval=1s", kafka.SubscriptionOptions{CommitInterval: time.Second}, true},
		{"wary/run-concurrency=64/sync-commit", kafka.SubscriptionOptions{}, true},
		{"wary/run-concurrency=64/ordered/sync-commit", kafka.SubscriptionOptions{Ordered: true}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			topic := fill(b, e, b.N)
			b.ResetTimer()
			sub, err := kafka.OpenSubscription(e.clientOpts(), uniqueName("g"), topic, &c.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.run {
				var got atomic.Int64
				err := sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
					if got.Add(1) == int64(b.N) {
						cancel()
					}
					return nil
				}, &broker.RunOptions{Concurrency: 64, MaxOutstanding: 1024})
				if err != nil {
					b.Fatal(err)
				}
			} else {
				got := 0
				for got < b.N {
					ds, err := sub.Receive(ctx, 500)
					if err != nil {
						b.Fatal(err)
					}
					for _, d := range ds {
						if err := d.Ack(ctx); err != nil {
							b.Fatal(err)
						}
					}
					got += len(ds)
				}
			}
			reportRate(b)
		})
	}
}
