package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/idem/idemtest"
)

// BenchmarkRabbitConfirmLatency is the floor under
// BenchmarkRelayLatencyRabbit: raw amqp091-go publishing b.N persistent
// messages to a quorum queue on the same fixed schedule (LatencyRate per
// second), one channel in confirm mode, each message's latency from its
// scheduled time to its confirm (no consumer). Run with
// -benchtime=5000x.
func BenchmarkRabbitConfirmLatency(b *testing.B) {
	_, exchange := rabbitQueue(b)
	ch := confirmChannel(b)
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, b.N+1))
	n := b.N
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
	b.ResetTimer()
	start := time.Now()
	interval := time.Second / idemtest.LatencyRate
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
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(pct(0.5), "p50-confirm-ms")
	b.ReportMetric(pct(0.99), "p99-confirm-ms")
	b.ReportMetric(pct(1), "max-confirm-ms")
}
