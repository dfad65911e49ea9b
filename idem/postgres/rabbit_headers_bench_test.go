package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkRabbitHeaders: what the headers and routing key the relay
// gives each row (wary-aggregate-id, wary-sequence, wary-type, the
// aggregate as the routing key: the rows of BenchmarkRelayRabbit, 100
// aggregates) cost RabbitMQ, against the same messages bare (message ID,
// body, persistent, as raw in BenchmarkRelayRabbit): raw amqp091-go
// publishing to a quorum queue behind a fanout exchange with 256 confirms
// in flight on one channel, in interleaved rounds of 5,000 (bare, then
// with headers). It reports each one's rate, bytes on the wire and
// RabbitMQ's CPU per message. Run with -benchtime=20000x.
func BenchmarkRabbitHeaders(b *testing.B) {
	const round = 5000
	var bareWire, headWire wireCount
	_, bareEx := rabbitQueue(b)
	_, headEx := rabbitQueue(b)
	bare, head := confirmChannel(b, bareWire.config()), confirmChannel(b, headWire.config())
	mqcpu := brokerCPU(b)
	type side struct {
		ch       *amqp.Channel
		confirms chan amqp.Confirmation
		exchange string
		wire     *wireCount
		headers  bool
		wall, mq time.Duration
		bytes    int64
	}
	sides := []*side{{ch: bare, exchange: bareEx, wire: &bareWire}, {ch: head, exchange: headEx, wire: &headWire, headers: true}}
	for _, s := range sides {
		s.confirms = s.ch.NotifyPublish(make(chan amqp.Confirmation, 256))
	}
	body := []byte("payload")
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		for _, s := range sides {
			var mq0 time.Duration
			if mqcpu != nil {
				mq0 = mqcpu()
			}
			w0, start := s.wire.n.Load(), time.Now()
			out := 0
			for i := range n {
				if out == 256 {
					if c := <-s.confirms; !c.Ack {
						b.Fatal("nack")
					}
					out--
				}
				p := amqp.Publishing{MessageId: fmt.Sprintf("m%09d", done+i), Body: body, DeliveryMode: amqp.Persistent}
				key := ""
				if s.headers {
					key = fmt.Sprintf("agg-%03d", i%100)
					p.Headers = amqp.Table{"wary-aggregate-id": key, "wary-sequence": fmt.Sprint((done+i)/100 + 1), "wary-type": "test.event"}
				}
				if err := s.ch.PublishWithContext(context.Background(), s.exchange, key, false, false, p); err != nil {
					b.Fatal(err)
				}
				out++
			}
			for ; out > 0; out-- {
				if c := <-s.confirms; !c.Ack {
					b.Fatal("nack")
				}
			}
			s.wall += time.Since(start)
			s.bytes += s.wire.n.Load() - w0
			if mqcpu != nil {
				s.mq += mqcpu() - mq0
			}
		}
	}
	b.StopTimer()
	for _, s := range sides {
		name := "bare"
		if s.headers {
			name = "headers"
		}
		b.ReportMetric(float64(b.N)/s.wall.Seconds(), name+"-msgs/s")
		b.ReportMetric(float64(s.bytes)/float64(b.N), name+"-wire-B/msg")
		if mqcpu != nil {
			b.ReportMetric(float64(s.mq.Microseconds())/float64(b.N), name+"-mqcpu-µs/msg")
		}
	}
	b.ReportMetric(100*sides[1].wall.Seconds()/sides[0].wall.Seconds(), "headers/bare-time-%")
}
