package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem/internal/idemtest"
)

// BenchmarkRabbitConfirmLatency is the floor under
// BenchmarkRelayLatencyRabbit: raw amqp091-go publishing b.N persistent
// messages to a quorum queue on the same fixed schedule (LatencyRate per
// second), one channel in confirm mode, each message's latency from its
// scheduled time to its confirm (no consumer). Run with
// -benchtime=5000x.
func BenchmarkRabbitConfirmLatency(b *testing.B) { confirmLatency(b, false) }

// BenchmarkRabbitConfirmLatencyLoaded is BenchmarkRabbitConfirmLatency
// under the rest of BenchmarkRelayLatencyRabbit's load: the same consumer
// (a wary subscription) receives and acknowledges the messages, and its
// producers commit outbox rows at the same rate to PostgreSQL
// (idemtest.ProduceAtLatencyRate), where no relay reads them.
// It is the floor a relay's publish meets on a machine that also runs the
// producers' database.
func BenchmarkRabbitConfirmLatencyLoaded(b *testing.B) { confirmLatency(b, true) }

func confirmLatency(b *testing.B, loaded bool) {
	var e *idemtest.OutboxEnv[pgx.Tx]
	if loaded {
		e = idemtest.SetupOutbox(b, newDB)
	}
	b.ResetTimer()
	lat := confirmRun(b, e, b.N, "m")
	b.StopTimer()
	b.ReportMetric(idemtest.Percentile(lat, 0.5), "p50-confirm-ms")
	b.ReportMetric(idemtest.Percentile(lat, 0.99), "p99-confirm-ms")
	b.ReportMetric(idemtest.Percentile(lat, 1), "max-confirm-ms")
}

// confirmRun is one run of BenchmarkRabbitConfirmLatency on a fresh
// queue: n messages on LatencyRate's schedule, their latencies from the
// schedule to the confirm, in milliseconds, sorted. With e, it is loaded:
// the relay benchmark's consumer acknowledges, and producers commit n
// outbox rows to e (message IDs ids followed by the row's number) on the
// same schedule.
func confirmRun(b *testing.B, e *idemtest.OutboxEnv[pgx.Tx], n int, ids string) []float64 {
	c, exchange := rabbitQueue(b)
	var consumer sync.WaitGroup
	defer consumer.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before consumer.Wait
	if e != nil {
		// The relay benchmark's consumer: a wary subscription, its acks
		// as the driver sends them.
		sub, err := rabbit.OpenSubscription(ctx, c, rabbit.Topology{Queue: exchange}, &rabbit.SubscriptionOptions{Prefetch: 200})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sub.Close() })
		consumer.Go(func() {
			for {
				ds, err := sub.Receive(ctx, 10)
				if err != nil {
					return
				}
				for _, d := range ds {
					_ = d.Ack(ctx)
				}
			}
		})
	}
	ch := confirmChannel(b, nil)
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n+1))
	sent := make([]time.Time, n)
	lat := make([]float64, 0, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Go(func() {
		for c := range confirms {
			now := time.Now()
			if !c.Ack {
				b.Error("nack")
			}
			mu.Lock()
			lat = append(lat, float64(now.Sub(sent[c.DeliveryTag-1]))/float64(time.Millisecond))
			done := len(lat) == n
			mu.Unlock()
			if done {
				return
			}
		}
	})
	start := time.Now()
	interval := time.Second / idemtest.LatencyRate
	if e != nil {
		wg.Go(func() {
			if err := idemtest.ProduceAtLatencyRate(ctx, e, start, n, ids, nil); err != nil {
				b.Error(err)
			}
		})
	}
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		mu.Lock()
		sent[i] = at
		mu.Unlock()
		err := ch.PublishWithContext(context.Background(), exchange, "", false, false, amqp.Publishing{
			MessageId: fmt.Sprintf("r%09d", i), Body: []byte("payload"), DeliveryMode: amqp.Persistent})
		if err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	slices.Sort(lat)
	return lat
}
