package kafka_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
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
			top, err := kafka.OpenTopic(b.Context(), e.topicClient(b), topic, nil)
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

// BenchmarkConsume compares, in alternating rounds of consumeRound
// messages on two topics filled alike (8 partitions, 100-byte bodies, a
// wary-id header), a wary subscription and a raw kgo group consumer, each
// joined before the timer starts: it measures steady-state consumption,
// not the group join. The raw consumers are
//
//   - per-record: PollRecords, then MarkCommitRecords for each record
//     (what wary's per-delivery Ack does), autocommit of the marks;
//   - batch: PollRecords, one MarkCommitRecords for the whole batch.
//
// wary is Receive(500) and an Ack per delivery with CommitInterval 1s (the
// same commit cadence as kgo's autocommit of marks: 5s by default, and
// neither commits in the timed part of a short run).
func BenchmarkConsume(b *testing.B) {
	e := newTestEnv(b)
	for _, raw := range []string{"per-record", "batch"} {
		b.Run("wary-receive+ack/vs/kgo-poll+mark-"+raw, func(b *testing.B) {
			wtopic, rtopic := fill(b, e, b.N), fill(b, e, b.N)
			sub, err := e.openSub(b.Context(), b, wtopic, uniqueName("g"), &kafka.SubscriptionOptions{CommitInterval: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			cl, err := kgo.NewClient(append(e.clientOpts(), kgo.ConsumerGroup(uniqueName("g")), kgo.ConsumeTopics(rtopic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitMarks())...)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			// Warm up both (group join, first fetch) outside the timer.
			b.N-- // the one record each side consumes here
			receives := 0
			wary := func(n int) {
				for got := 0; got < n; {
					receives++
					ds, err := sub.Receive(ctx, min(500, n-got))
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
			kgoRaw := func(n int) {
				for got := 0; got < n; {
					fs := cl.PollRecords(ctx, min(500, n-got))
					if err := fs.Err0(); err != nil {
						b.Fatal(err)
					}
					recs := fs.Records()
					if raw == "batch" {
						cl.MarkCommitRecords(recs...)
					} else {
						for _, r := range recs {
							cl.MarkCommitRecords(r)
						}
					}
					got += len(recs)
				}
			}
			wary(1)
			kgoRaw(1)
			paired(b, consumeRound, wary, kgoRaw)
			b.ReportMetric(float64(b.N)/float64(receives), "wary-msgs/receive")
		})
	}
	for _, c := range []struct {
		name string
		opts kafka.SubscriptionOptions
	}{
		{"wary/run-concurrency=64/commit-interval=1s", kafka.SubscriptionOptions{CommitInterval: time.Second}},
		{"wary/run-concurrency=64/sync-commit", kafka.SubscriptionOptions{}},
		{"wary/run-concurrency=64/ordered/sync-commit", kafka.SubscriptionOptions{Ordered: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			topic := fill(b, e, b.N)
			b.ResetTimer()
			sub, err := e.openSub(b.Context(), b, topic, uniqueName("g"), &c.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got atomic.Int64
			err = sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
				if got.Add(1) == int64(b.N) {
					cancel()
				}
				return nil
			}, &broker.RunOptions{Concurrency: 64, MaxOutstanding: 1024})
			if err != nil {
				b.Fatal(err)
			}
			reportRate(b)
		})
	}
}

// consumeRound is how many messages each side consumes per round.
const consumeRound = 2000

// paired runs wary and raw alternately, round messages each per round, and
// reports both rates, their ratio, and the process's CPU per message on
// each side (user+system; kfake runs in the process, so this includes the
// broker's share of serving that side).
func paired(b *testing.B, round int, wary, raw func(n int)) {
	var tw, tr, cw, cr time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		start, cpu := time.Now(), cpuTime()
		wary(n)
		tw += time.Since(start)
		cw += cpuTime() - cpu
		start, cpu = time.Now(), cpuTime()
		raw(n)
		tr += time.Since(start)
		cr += cpuTime() - cpu
	}
	b.StopTimer()
	w, r := float64(b.N)/tw.Seconds(), float64(b.N)/tr.Seconds()
	b.ReportMetric(w, "wary-msgs/s")
	b.ReportMetric(r, "kgo-msgs/s")
	b.ReportMetric(100*w/r, "wary/kgo-%")
	b.ReportMetric(float64(cw.Nanoseconds())/float64(b.N), "wary-cpu-ns/msg")
	b.ReportMetric(float64(cr.Nanoseconds())/float64(b.N), "kgo-cpu-ns/msg")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
